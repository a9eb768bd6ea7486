package image

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
)

// WgetSubcommand is the `ray` subcommand the image's /bin/wget runs
// (raysim.WgetCommand; repeated here so this package does not import raysim).
const WgetSubcommand = "raysim-wget"

// PythonSubcommand is the `ray` subcommand the image's /usr/bin/python and python3 run
// (raysim.PythonCommand, likewise).
const PythonSubcommand = "raysim-python"

// SimImageRepository is where raysim images are named.
const SimImageRepository = "rayctl.local/raysim"

// SimImageRef is the reference of the raysim image of a rayctl version.
func SimImageRef(version string) string {
	if version == "" {
		version = "dev"
	}
	return SimImageRepository + ":" + strings.ReplaceAll(version, "+", "_")
}

// Default host paths of the Debian packages the image is made from.
var (
	// DefaultBusyboxPaths are tried in order; Debian's busybox-static installs /bin/busybox.
	DefaultBusyboxPaths = []string{"/bin/busybox", "/usr/bin/busybox"}
	// DefaultBashPaths are tried in order; Debian's bash-static installs /bin/bash-static.
	DefaultBashPaths = []string{"/bin/bash-static", "/usr/bin/bash-static"}
)

// SimImageOptions says what goes into the raysim image.
type SimImageOptions struct {
	// RayBinary is a statically linked rayctl (or raysim) binary, installed as
	// /usr/bin/ray. Required.
	RayBinary string
	// RayctlBinary is the statically linked rayctl, installed as /usr/bin/rayctl (in-cluster
	// kubectl: `rayctl kubectl`, or a link named kubectl) when RayBinary is raysim alone; empty
	// means RayBinary is rayctl, and /usr/bin/rayctl links to /usr/bin/ray.
	RayctlBinary string
	// BusyboxPath is a statically linked busybox; empty means the first of
	// DefaultBusyboxPaths that exists.
	BusyboxPath string
	// BashPath is a statically linked bash; empty means the first of
	// DefaultBashPaths that exists, and none found means /bin/bash hands over
	// to busybox's sh.
	BashPath string
	// Version tags the image (SimImageRef(Version)) unless Ref is set.
	Version string
	// Ref overrides the image reference.
	Ref string
}

// BuildSimImage writes the raysim image to w as an OCI image layout tar and
// returns its reference. The image holds:
//
//	/usr/bin/ray            RayBinary: rayctl (raysim when run as `ray`), or raysim alone
//	/usr/bin/rayctl         RayctlBinary, or a link to /usr/bin/ray
//	/bin/busybox + applets  sh (ash, with ulimit), nslookup, nc, coreutils…
//	/bin/wget               a script running `ray raysim-wget` (busybox-static's
//	                        wget crashes with -T, which KubeRay probes pass)
//	/bin/bash               bash-static, or a wrapper that runs busybox sh
//	/usr/bin/python[3]      a script running `ray raysim-python`: no Python, but
//	                        KubeRay's Redis cleanup Job's `python -c` is answered
//	/etc/passwd, /etc/group root, ray (1000:100), nobody
//	/tmp, /home/ray         scratch and the ray user's home
//
// Its default command is /bin/sh; pod specs give the real command.
func BuildSimImage(w io.Writer, opts SimImageOptions) (ref string, err error) {
	if opts.RayBinary == "" {
		return "", errors.New("raysim image: the path of a static rayctl binary is required")
	}
	arch, err := checkStatic(opts.RayBinary, "the rayctl binary", "build it with CGO_ENABLED=0")
	if err != nil {
		return "", err
	}
	busybox := opts.BusyboxPath
	if busybox == "" {
		busybox = firstExisting(DefaultBusyboxPaths)
	}
	if busybox == "" {
		return "", errors.New("raysim image: busybox not found (looked in " + strings.Join(DefaultBusyboxPaths, ", ") + "); install a static one with `apt-get install -y busybox-static`")
	}
	if _, err := checkStatic(busybox, "busybox", "install the static build with `apt-get install -y busybox-static`"); err != nil {
		return "", err
	}
	bash := opts.BashPath
	if bash == "" {
		bash = firstExisting(DefaultBashPaths)
	}
	if bash != "" {
		if _, err := checkStatic(bash, "bash", "install the static build with `apt-get install -y bash-static`, or leave BashPath empty"); err != nil {
			return "", err
		}
	}
	ref = opts.Ref
	if ref == "" {
		ref = SimImageRef(opts.Version)
	}

	if opts.RayctlBinary != "" {
		if _, err := checkStatic(opts.RayctlBinary, "the rayctl binary", "build it with CGO_ENABLED=0"); err != nil {
			return "", err
		}
	}
	layer, err := buildSimLayer(opts.RayBinary, opts.RayctlBinary, busybox, bash)
	if err != nil {
		return "", err
	}
	defer os.Remove(layer.Path)

	bashNote := "bash-static"
	if bash == "" {
		bashNote = "busybox sh behind /bin/bash"
	}
	cfg := Config{
		Created: epoch.Format("2006-01-02T15:04:05Z"), Architecture: arch, OS: "linux",
		Config: RuntimeConfig{
			Env:        []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root"},
			Cmd:        []string{"/bin/sh"},
			WorkingDir: "/",
			Labels: map[string]string{
				"org.opencontainers.image.title":       "raysim",
				"org.opencontainers.image.description": "rayctl's offline stand-in for Ray (raysim) as /usr/bin/ray, with busybox and " + bashNote,
				"org.opencontainers.image.version":     opts.Version,
			},
		},
		History: []History{{Created: epoch.Format("2006-01-02T15:04:05Z"), CreatedBy: "rayctl image build-sim",
			Comment: "raysim (rayctl as /usr/bin/ray), busybox, " + bashNote}},
	}
	if _, err := WriteLayout(w, ref, cfg, []Layer{layer}); err != nil {
		return "", err
	}
	return ref, nil
}

func firstExisting(paths []string) string {
	for _, p := range paths {
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			return p
		}
	}
	return ""
}

// checkStatic makes sure path is a statically linked ELF executable (no
// program interpreter) and returns its OCI architecture name.
func checkStatic(path, what, fix string) (string, error) {
	f, err := elf.Open(path)
	if err != nil {
		return "", fmt.Errorf("raysim image: %s at %s is not a usable executable: %w; %s", what, path, err, fix)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return "", fmt.Errorf("raysim image: %s at %s is dynamically linked and would not run in the image; %s", what, path, fix)
		}
	}
	switch f.Machine {
	case elf.EM_X86_64:
		return "amd64", nil
	case elf.EM_AARCH64:
		return "arm64", nil
	case elf.EM_386:
		return "386", nil
	case elf.EM_ARM:
		return "arm", nil
	case elf.EM_PPC64:
		return "ppc64le", nil
	case elf.EM_S390:
		return "s390x", nil
	case elf.EM_RISCV:
		return "riscv64", nil
	}
	return runtime.GOARCH, nil
}

// busyboxApplets asks busybox for its applet list; if it cannot run here
// (another architecture) a fixed list of the applets raysim's pods need is used.
func busyboxApplets(busybox string) []string {
	out, err := exec.Command(busybox, "--list").Output()
	if err == nil {
		var names []string
		for _, n := range strings.Fields(string(out)) {
			if n != "busybox" && !strings.Contains(n, "/") {
				names = append(names, n)
			}
		}
		if len(names) > 0 {
			return names
		}
	}
	return []string{"sh", "ash", "wget", "nslookup", "cat", "ls", "echo", "sleep", "env", "grep", "sed", "awk", "ps", "kill",
		"mkdir", "rm", "cp", "mv", "touch", "test", "[", "true", "false", "hostname", "id", "head", "tail", "tr", "wc", "nc", "ip", "ping", "timeout"}
}

type hashingWriter struct {
	w io.Writer
	h hash.Hash
	n int64
}

// Write passes p on and hashes what was written.
func (h *hashingWriter) Write(p []byte) (int, error) {
	n, err := h.w.Write(p)
	h.h.Write(p[:n])
	h.n += int64(n)
	return n, err
}

// buildSimLayer writes the image's single layer to a temp file.
func buildSimLayer(ray, rayctl, busybox, bash string) (Layer, error) {
	f, err := os.CreateTemp("", "raysim-layer-*.tar.gz")
	if err != nil {
		return Layer{}, err
	}
	ok := false
	defer func() {
		f.Close()
		if !ok {
			os.Remove(f.Name())
		}
	}()
	compressed := &hashingWriter{w: f, h: sha256.New()}
	gz, err := gzip.NewWriterLevel(compressed, gzip.BestSpeed)
	if err != nil {
		return Layer{}, err
	}
	uncompressed := &hashingWriter{w: gz, h: sha256.New()}
	tw := tar.NewWriter(uncompressed)

	dir := func(name string, mode int64, uid, gid int) error {
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: mode, Uid: uid, Gid: gid, ModTime: epoch, Format: tar.FormatPAX})
	}
	file := func(name string, mode int64, data []byte) error {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(data)), ModTime: epoch, Format: tar.FormatPAX}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	hostFile := func(name, src string) error {
		in, err := os.Open(src)
		if err != nil {
			return err
		}
		defer in.Close()
		st, err := in.Stat()
		if err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o755, Size: st.Size(), ModTime: epoch, Format: tar.FormatPAX}); err != nil {
			return err
		}
		_, err = io.Copy(tw, in)
		return err
	}
	link := func(name, target string) error {
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: name, Linkname: target, Mode: 0o777, ModTime: epoch, Format: tar.FormatPAX})
	}

	steps := []func() error{
		func() error {
			for _, d := range []struct {
				name string
				mode int64
			}{{"bin", 0o755}, {"dev", 0o755}, {"etc", 0o755}, {"home", 0o755}, {"proc", 0o555}, {"root", 0o700}, {"run", 0o755},
				{"sbin", 0o755}, {"sys", 0o555}, {"tmp", 0o1777}, {"usr", 0o755}, {"usr/bin", 0o755}, {"usr/local", 0o755},
				{"usr/local/bin", 0o755}, {"usr/sbin", 0o755}, {"var", 0o755}, {"var/tmp", 0o1777}} {
				if err := dir(d.name, d.mode, 0, 0); err != nil {
					return err
				}
			}
			return dir("home/ray", 0o755, 1000, 100)
		},
		func() error {
			return file("etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/bin/sh\nray:x:1000:100:ray:/home/ray:/bin/bash\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n"))
		},
		func() error {
			return file("etc/group", 0o644, []byte("root:x:0:\nusers:x:100:ray\nnogroup:x:65534:\n"))
		},
		func() error { return file("etc/nsswitch.conf", 0o644, []byte("hosts: files dns\n")) },
		func() error { return file("etc/hosts", 0o644, []byte("127.0.0.1\tlocalhost\n::1\tlocalhost\n")) },
		func() error { return hostFile("bin/busybox", busybox) },
		func() error {
			if bash != "" {
				return hostFile("bin/bash", bash)
			}
			return file("bin/bash", 0o755, []byte("#!/bin/sh\n# raysim image: no bash-static was available; busybox sh stands in.\nexec /bin/sh \"$@\"\n"))
		},
		func() error { return hostFile("usr/bin/ray", ray) },
		func() error {
			if rayctl == "" {
				return link("usr/bin/rayctl", "ray")
			}
			return hostFile("usr/bin/rayctl", rayctl)
		},
		func() error {
			// busybox-static's wget crashes with -T (which KubeRay's probes pass); raysim's own wget stands in.
			return file("bin/wget", 0o755, []byte("#!/bin/sh\n# raysim image: wget is served by raysim (busybox's stays available as `busybox wget`).\nexec /usr/bin/ray "+WgetSubcommand+" \"$@\"\n"))
		},
		func() error {
			script := []byte("#!/bin/sh\n# raysim image: no Python; raysim answers the `python -c` of KubeRay's Redis cleanup Job.\nexec /usr/bin/ray " + PythonSubcommand + " \"$@\"\n")
			if err := file("usr/bin/python3", 0o755, script); err != nil {
				return err
			}
			return link("usr/bin/python", "/usr/bin/python3")
		},
		func() error {
			taken := map[string]bool{"bash": true, "ray": true, "wget": true, "python": true, "python3": true}
			applets := busyboxApplets(busybox)
			sort.Strings(applets)
			for _, a := range applets {
				if taken[a] {
					continue
				}
				taken[a] = true
				if err := link(filepath.Join("bin", a), "/bin/busybox"); err != nil {
					return err
				}
			}
			for _, l := range []struct{ name, target string }{{"usr/bin/env", "/bin/busybox"}, {"usr/bin/bash", "/bin/bash"}, {"usr/bin/sh", "/bin/sh"}} {
				if err := link(l.name, l.target); err != nil {
					return err
				}
			}
			return nil
		},
	}
	for _, s := range steps {
		if err := s(); err != nil {
			return Layer{}, fmt.Errorf("raysim image layer: %w", err)
		}
	}
	if err := tw.Close(); err != nil {
		return Layer{}, err
	}
	if err := gz.Close(); err != nil {
		return Layer{}, err
	}
	if err := f.Sync(); err != nil {
		return Layer{}, err
	}
	ok = true
	return Layer{
		Path:   f.Name(),
		Digest: "sha256:" + hex.EncodeToString(compressed.h.Sum(nil)),
		DiffID: "sha256:" + hex.EncodeToString(uncompressed.h.Sum(nil)),
		Size:   compressed.n,
	}, nil
}
