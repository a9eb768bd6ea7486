// Package node runs raysim's long-lived processes: the head (GCS, dashboard
// with the Jobs API, agent and metrics ports) and the worker (registration,
// heartbeats, agent and metrics ports). The CLI in package raysim wraps them.
package node

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"
)

// DefaultTempDir is where Ray keeps its session files (`ray start --temp-dir`).
const DefaultTempDir = "/tmp/ray"

// HeadInfo is what a running head writes to <temp-dir>/raysim/head.json so
// that local commands (`ray status`, `ray job …`, `ray stop`, tests) find it.
type HeadInfo struct {
	PID             int    `json:"pid"`
	NodeID          string `json:"node_id"`
	NodeIP          string `json:"node_ip_address"`
	SessionName     string `json:"session_name"`
	SessionDir      string `json:"session_dir"`
	GCSAddress      string `json:"gcs_address"`
	DashboardURL    string `json:"dashboard_url"`
	AgentAddress    string `json:"agent_address"`
	MetricsAddress  string `json:"metrics_address"`
	StartedUnixMsec int64  `json:"started_ms"`
}

// StateDir is the directory raysim keeps its own files in, under a temp dir.
func StateDir(tempDir string) string {
	if tempDir == "" {
		tempDir = DefaultTempDir
	}
	return filepath.Join(tempDir, "raysim")
}

func headInfoPath(tempDir string) string { return filepath.Join(StateDir(tempDir), "head.json") }

// WriteHeadInfo stores info atomically.
func WriteHeadInfo(tempDir string, info HeadInfo) error {
	dir := StateDir(tempDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return err
	}
	tmp := headInfoPath(tempDir) + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, headInfoPath(tempDir))
}

// ReadHeadInfo loads the head info of tempDir. It fails when no head wrote one.
func ReadHeadInfo(tempDir string) (HeadInfo, error) {
	var info HeadInfo
	b, err := os.ReadFile(headInfoPath(tempDir))
	if err != nil {
		return info, err
	}
	return info, json.Unmarshal(b, &info)
}

// RemoveHeadInfo deletes the head info if it still belongs to pid.
func RemoveHeadInfo(tempDir string, pid int) {
	if info, err := ReadHeadInfo(tempDir); err == nil && info.PID == pid {
		_ = os.Remove(headInfoPath(tempDir))
	}
}

// WaitHeadInfo polls for a head info written by process pid (any pid if 0)
// until timeout.
func WaitHeadInfo(tempDir string, pid int, timeout time.Duration) (HeadInfo, error) {
	deadline := time.Now().Add(timeout)
	for {
		info, err := ReadHeadInfo(tempDir)
		if err == nil && (pid == 0 || info.PID == pid) {
			return info, nil
		}
		if time.Now().After(deadline) {
			if err == nil {
				err = fmt.Errorf("head info belongs to pid %d, not %d", info.PID, pid)
			}
			return HeadInfo{}, fmt.Errorf("no head started within %s: %w", timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// newSessionDir creates <temp-dir>/session_<time>_<pid> with a logs/ folder
// and points <temp-dir>/session_latest at it, as Ray does.
func newSessionDir(tempDir string) (name, dir string, err error) {
	if tempDir == "" {
		tempDir = DefaultTempDir
	}
	name = fmt.Sprintf("session_%s_%d", time.Now().Format("2006-01-02_15-04-05_000000"), os.Getpid())
	dir = filepath.Join(tempDir, name)
	if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o755); err != nil {
		return "", "", err
	}
	latest := filepath.Join(tempDir, "session_latest")
	_ = os.Remove(latest)
	_ = os.Symlink(name, latest)
	return name, dir, nil
}

// DetectNodeIP returns the first non-loopback IPv4 address of an up
// interface, or 127.0.0.1.
func DetectNodeIP() string {
	ifaces, err := net.Interfaces()
	if err == nil {
		for _, ifc := range ifaces {
			if ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagLoopback != 0 {
				continue
			}
			addrs, _ := ifc.Addrs()
			for _, a := range addrs {
				if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && !ipn.IP.IsLinkLocalUnicast() {
					return ipn.IP.String()
				}
			}
		}
	}
	return "127.0.0.1"
}

// nodeIPToward returns the local address used to reach hostport, which is the
// address the node is seen at by the head.
func nodeIPToward(hostport string) string {
	c, err := net.Dial("udp", hostport)
	if err != nil {
		return DetectNodeIP()
	}
	defer c.Close()
	if ua, ok := c.LocalAddr().(*net.UDPAddr); ok && ua.IP != nil {
		return ua.IP.String()
	}
	return DetectNodeIP()
}

// listen binds host:port (port 0 picks a free port).
func listen(what, host string, port int) (net.Listener, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, fmt.Sprint(port)))
	if err != nil {
		return nil, fmt.Errorf("%s port: %w", what, err)
	}
	return l, nil
}

// advertise turns a bound listener into the address others should dial.
func advertise(l net.Listener, bindHost, nodeIP string) string {
	port := l.Addr().(*net.TCPAddr).Port
	host := bindHost
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = nodeIP
	}
	return net.JoinHostPort(host, fmt.Sprint(port))
}
