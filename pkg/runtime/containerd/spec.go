package containerd

import (
	"context"
	"errors"
	"os"
	"path"
	"strconv"
	"strings"
	"syscall"

	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/oci"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/rayctl/rayctl/pkg/runtime"
)

// cpuPeriod is the CFS period CPU limits are expressed in (100 ms, as the kubelet uses).
const cpuPeriod = 100000

// openFilesLimit is every container's RLIMIT_NOFILE, soft and hard. containerd's default spec says 1024,
// which Kubernetes nodes never give: containerd's CRI drops that limit, so a pod inherits containerd's own,
// 1048576 on most nodes (LimitNOFILE=infinity). KubeRay's Ray containers begin with `ulimit -n 65536`,
// which fails under a hard limit of 1024, and Ray then runs with 1024 descriptors. rayctl gives what
// it may give: 1048576, or less where the kernel's fs.nr_open or rayctl's own hard limit is lower (a
// container's limit above them fails to start where rayctl lacks CAP_SYS_RESOURCE, as in containers).
var openFilesLimit = openFilesCeiling(1 << 20)

// openFilesCeiling is max, or the kernel's fs.nr_open or this process's hard RLIMIT_NOFILE if lower.
func openFilesCeiling(max uint64) uint64 {
	if b, err := os.ReadFile("/proc/sys/fs/nr_open"); err == nil {
		if n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64); err == nil && n < max {
			max = n
		}
	}
	var own syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &own); err == nil && own.Max < max {
		max = own.Max
	}
	return max
}

// specOpts builds the OCI spec of a container: process, environment,
// working dir, user, hostname, network namespace, mounts (the sandbox's DNS
// files unless the config mounts those paths itself) and cgroup limits
// (none where the runtime has no cgroups: rootless).
func (r *Runtime) specOpts(sb *runtime.Sandbox, cfg runtime.ContainerConfig, img *runtime.Image) ([]oci.SpecOpts, error) {
	argv := img.Argv(cfg.Command, cfg.Args)
	if len(argv) == 0 {
		return nil, errors.New("no command: neither the container nor its image gives one")
	}
	env := make([]string, 0, len(cfg.Env))
	for _, e := range cfg.Env {
		env = append(env, e.Name+"="+e.Value)
	}
	cwd := cfg.WorkingDir
	if cwd == "" {
		cwd = img.WorkingDir
	}
	if cwd == "" {
		cwd = "/"
	}
	opts := []oci.SpecOpts{
		oci.WithProcessArgs(argv...),
		oci.WithEnv(img.Env),
		oci.WithEnv(env),
		oci.WithProcessCwd(cwd),
	}
	switch {
	case cfg.RunAsUser != nil && cfg.RunAsGroup != nil:
		opts = append(opts, oci.WithUIDGID(uint32(*cfg.RunAsUser), uint32(*cfg.RunAsGroup)))
	case cfg.RunAsUser != nil:
		opts = append(opts, oci.WithUserID(uint32(*cfg.RunAsUser)))
	case img.User != "":
		opts = append(opts, oci.WithUser(img.User))
	}
	if sb.Config.HostNetwork || sb.NetNSPath == "" {
		opts = append(opts, oci.WithHostNamespace(specs.NetworkNamespace), oci.WithHostNamespace(specs.UTSNamespace))
	} else {
		hostname := sb.Config.Hostname
		if hostname == "" {
			hostname = sb.Config.Name
		}
		opts = append(opts, oci.WithLinuxNamespace(specs.LinuxNamespace{Type: specs.NetworkNamespace, Path: sb.NetNSPath}),
			oci.WithHostname(hostname))
	}
	opts = append(opts, oci.WithMounts(mounts(sb, cfg.Mounts)), oci.WithRlimit(&specs.POSIXRlimit{Type: "RLIMIT_NOFILE", Hard: openFilesLimit, Soft: openFilesLimit}))
	if cfg.TTY {
		opts = append(opts, oci.WithTTY)
	}
	if cfg.Privileged {
		opts = append(opts, oci.WithPrivileged, oci.WithAllDevicesAllowed, oci.WithHostDevices)
	}
	if r.noLimits != "" {
		return opts, nil
	}
	if cfg.Resources.MemoryBytes > 0 {
		opts = append(opts, oci.WithMemoryLimit(uint64(cfg.Resources.MemoryBytes)))
	}
	if cfg.Resources.CPUMillis > 0 {
		opts = append(opts, oci.WithCPUCFS(cfg.Resources.CPUMillis*cpuPeriod/1000, cpuPeriod))
	}
	if cfg.Resources.CPUShares > 0 {
		opts = append(opts, oci.WithCPUShares(uint64(cfg.Resources.CPUShares)))
	}
	return opts, nil
}

// mounts are the config's bind mounts plus the sandbox's hosts, resolv.conf
// and hostname files at the /etc paths the config leaves free.
func mounts(sb *runtime.Sandbox, ms []runtime.Mount) []specs.Mount {
	var out []specs.Mount
	taken := map[string]bool{}
	for _, m := range ms {
		opt := "rw"
		if m.ReadOnly {
			opt = "ro"
		}
		out = append(out, specs.Mount{Destination: m.ContainerPath, Type: "bind", Source: m.HostPath, Options: []string{"rbind", "rprivate", opt}})
		taken[path.Clean(m.ContainerPath)] = true
	}
	for _, f := range []struct{ dest, src string }{{"/etc/hosts", sb.HostsPath}, {"/etc/resolv.conf", sb.ResolvConfPath}, {"/etc/hostname", sb.HostnamePath}} {
		if f.src != "" && !taken[f.dest] {
			out = append(out, specs.Mount{Destination: f.dest, Type: "bind", Source: f.src, Options: []string{"rbind", "rprivate", "rw"}})
		}
	}
	return out
}

// withCgroupPath puts the container in a known cgroup, where its OOM kills are read.
func withCgroupPath(p string) oci.SpecOpts {
	return func(_ context.Context, _ oci.Client, _ *containers.Container, s *oci.Spec) error {
		if s.Linux == nil {
			s.Linux = &specs.Linux{}
		}
		s.Linux.CgroupsPath = p
		return nil
	}
}
