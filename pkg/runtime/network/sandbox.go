package network

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/rayctl/rayctl/pkg/runtime"
)

// The sandbox files a pod's containers mount, written into the sandbox dir.
const (
	HostsFile      = "hosts"
	ResolvConfFile = "resolv.conf"
	HostnameFile   = "hostname"
)

// RunSandbox is runtime.Runtime's RunSandbox for any runtime built on this
// package: it sets up the pod's network (unless HostNetwork or HostOnly),
// writes its hosts, resolv.conf and hostname files into cfg.Dir (or a dir of
// the manager's own when empty), and records the sandbox for ListSandboxes.
// Calling it again for the same pod UID returns the same sandbox and IP.
func (m *Manager) RunSandbox(cfg runtime.SandboxConfig) (*runtime.Sandbox, error) {
	if cfg.PodUID == "" {
		return nil, errors.New("network: sandbox without a pod UID")
	}
	if cfg.Dir == "" {
		cfg.Dir = filepath.Join(m.cfg.StateDir, "sandboxes", cfg.PodUID)
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, err
	}
	sb := &runtime.Sandbox{PodUID: cfg.PodUID, Labels: cfg.Labels, Config: cfg,
		HostsPath:      filepath.Join(cfg.Dir, HostsFile),
		ResolvConfPath: filepath.Join(cfg.Dir, ResolvConfFile),
		HostnamePath:   filepath.Join(cfg.Dir, HostnameFile)}
	if cfg.HostNetwork || m.cfg.HostOnly {
		// The ports are checked and the sandbox recorded under one lock, so two pods declaring one
		// port cannot both pass.
		m.hostPorts.Lock()
		defer m.hostPorts.Unlock()
		if err := m.checkHostPorts(cfg); err != nil {
			return nil, err
		}
		sb.IP = HostIP()
		if m.cfg.HostOnly {
			// Every pod shares the host's network, where nothing of a pod should listen beyond the
			// loopback: that is the address that reaches its programs.
			sb.IP = "127.0.0.1"
		}
	} else {
		att, err := m.Setup(cfg.PodUID)
		if err != nil {
			return nil, err
		}
		sb.IP, sb.NetNSPath = att.IP.String(), att.NetNSPath
	}
	if err := writeSandboxFiles(sb); err != nil {
		_ = m.Teardown(cfg.PodUID)
		return nil, fmt.Errorf("network: sandbox files of pod %s: %w", cfg.PodUID, err)
	}
	if err := m.saveRecord(sb); err != nil {
		_ = m.Teardown(cfg.PodUID)
		return nil, err
	}
	return sb, nil
}

// Sandbox returns the recorded sandbox of a pod, or an error wrapping
// runtime.ErrNotFound.
func (m *Manager) Sandbox(podUID string) (*runtime.Sandbox, error) {
	b, err := os.ReadFile(m.recordPath(podUID))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("sandbox of pod %s: %w", podUID, runtime.ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	sb := &runtime.Sandbox{}
	if err := json.Unmarshal(b, sb); err != nil {
		return nil, fmt.Errorf("sandbox record of pod %s: %w", podUID, err)
	}
	return sb, nil
}

// RemoveSandbox tears the pod's network down and deletes its sandbox files
// and record. A missing sandbox is not an error.
func (m *Manager) RemoveSandbox(podUID string) error {
	sb, err := m.Sandbox(podUID)
	if err != nil && !errors.Is(err, runtime.ErrNotFound) {
		return err
	}
	if err := m.Teardown(podUID); err != nil {
		return err
	}
	if sb != nil {
		for _, p := range []string{sb.HostsPath, sb.ResolvConfPath, sb.HostnamePath} {
			if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
				return err
			}
		}
		// The manager's own dir for pods given none; a pod's own Dir stays.
		_ = os.Remove(filepath.Join(m.cfg.StateDir, "sandboxes", podUID))
	}
	if err := os.Remove(m.recordPath(podUID)); err != nil && !os.IsNotExist(err) {
		return err
	}
	return nil
}

// ListSandboxes returns the recorded sandboxes, sorted by pod UID.
func (m *Manager) ListSandboxes() ([]*runtime.Sandbox, error) {
	entries, err := os.ReadDir(filepath.Join(m.cfg.StateDir, "sandboxes"))
	if err != nil {
		return nil, err
	}
	var out []*runtime.Sandbox
	for _, e := range entries {
		uid, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || e.IsDir() {
			continue
		}
		sb, err := m.Sandbox(uid)
		if errors.Is(err, runtime.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, sb)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].PodUID < out[j].PodUID })
	return out, nil
}

// Cleanup removes the sandbox, namespace and IP of every pod whose UID is not
// in live (nil removes all), and returns the UIDs it removed: for
// `rayctl down --purge` and for what a crash left behind.
func (m *Manager) Cleanup(live map[string]bool) ([]string, error) {
	seen := map[string]bool{}
	sbs, err := m.ListSandboxes()
	if err != nil {
		return nil, err
	}
	uids := make([]string, 0, len(sbs))
	for _, sb := range sbs {
		uids = append(uids, sb.PodUID)
	}
	if !m.cfg.HostOnly {
		more, err := m.podUIDs()
		if err != nil {
			return nil, err
		}
		uids = append(uids, more...)
	}
	var removed []string
	var errs []error
	for _, uid := range uids {
		if live[uid] || seen[uid] {
			continue
		}
		seen[uid] = true
		if err := m.RemoveSandbox(uid); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, uid)
	}
	sort.Strings(removed)
	return removed, errors.Join(errs...)
}

func (m *Manager) recordPath(podUID string) string {
	return filepath.Join(m.cfg.StateDir, "sandboxes", podUID+".json")
}

func (m *Manager) saveRecord(sb *runtime.Sandbox) error {
	b, err := json.MarshalIndent(sb, "", "  ")
	if err != nil {
		return err
	}
	p := m.recordPath(sb.PodUID)
	if err := os.WriteFile(p+".tmp", b, 0o644); err != nil {
		return err
	}
	return os.Rename(p+".tmp", p)
}

// writeSandboxFiles writes the pod's hosts, resolv.conf and hostname.
func writeSandboxFiles(sb *runtime.Sandbox) error {
	cfg := sb.Config
	hostname := cfg.Hostname
	if hostname == "" {
		hostname = cfg.Name
	}
	files := map[string]string{
		sb.HostsPath:      HostsContent(cfg, sb.IP),
		sb.ResolvConfPath: ResolvConfContent(cfg.DNS),
		sb.HostnamePath:   hostname + "\n",
	}
	for path, content := range files {
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// HostsContent is a pod's /etc/hosts, laid out as the kubelet does: the
// loopback names, the pod's IP with its FQDN (when it has a subdomain) and
// hostname, then its host aliases. A host-network pod gets the host's own
// file plus its aliases.
func HostsContent(cfg runtime.SandboxConfig, ip string) string {
	var b strings.Builder
	if cfg.HostNetwork {
		host, _ := os.ReadFile("/etc/hosts")
		b.Write(host)
		if len(host) > 0 && host[len(host)-1] != '\n' {
			b.WriteByte('\n')
		}
	} else {
		hostname := cfg.Hostname
		if hostname == "" {
			hostname = cfg.Name
		}
		b.WriteString("# Kubernetes-managed hosts file (rayctl).\n")
		b.WriteString("127.0.0.1\tlocalhost\n")
		b.WriteString("::1\tlocalhost ip6-localhost ip6-loopback\n")
		b.WriteString("fe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n")
		if cfg.Subdomain != "" {
			fmt.Fprintf(&b, "%s\t%s.%s.%s.svc.%s\t%s\n", ip, hostname, cfg.Subdomain, cfg.Namespace, ClusterDomain, hostname)
		} else {
			fmt.Fprintf(&b, "%s\t%s\n", ip, hostname)
		}
	}
	if len(cfg.HostAliases) > 0 {
		b.WriteString("\n# Entries added by HostAliases.\n")
		for _, a := range cfg.HostAliases {
			fmt.Fprintf(&b, "%s\t%s\n", a.IP, strings.Join(a.Hostnames, "\t"))
		}
	}
	return b.String()
}

// ResolvConfContent renders dns as resolv.conf; with no nameservers it is the
// host's own resolv.conf (what dnsPolicy Default gives).
func ResolvConfContent(dns runtime.DNSConfig) string {
	if len(dns.Nameservers) == 0 && len(dns.Searches) == 0 && len(dns.Options) == 0 {
		host, err := os.ReadFile("/etc/resolv.conf")
		if err == nil {
			return string(host)
		}
		return ""
	}
	var b strings.Builder
	for _, ns := range dns.Nameservers {
		fmt.Fprintf(&b, "nameserver %s\n", ns)
	}
	if len(dns.Searches) > 0 {
		fmt.Fprintf(&b, "search %s\n", strings.Join(dns.Searches, " "))
	}
	if len(dns.Options) > 0 {
		fmt.Fprintf(&b, "options %s\n", strings.Join(dns.Options, " "))
	}
	return b.String()
}
