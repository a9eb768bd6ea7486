//go:build linux

package egress

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/vishvananda/netlink"

	"github.com/rayctl/rayctl/pkg/runtime/network/nft"
)

// Ranges pods are refused: slirp4netns's own (the tap 10.0.2.100, the gateway 10.0.2.2 — the host's
// loopback unless disabled — and its DNS 10.0.2.3), nothing pods need; and the link-local range, where a
// cloud VM's metadata service (169.254.169.254) hands out the machine's credentials.
var (
	slirpNet     = &net.IPNet{IP: net.IPv4(10, 0, 2, 0).To4(), Mask: net.CIDRMask(24, 32)}
	linkLocalNet = &net.IPNet{IP: net.IPv4(169, 254, 0, 0).To4(), Mask: net.CIDRMask(16, 32)}
)

// slirpReadyTimeout bounds how long slirp4netns may take to make its tap.
const slirpReadyTimeout = 15 * time.Second

// Egress is the node namespace's way out (or its closed door), kept until Close.
type Egress struct {
	cfg  Config
	on   bool
	line string

	mu        sync.Mutex // guards what follows
	conn      *nftables.Conn
	hostAddrs []net.IP
	slirp     *slirpProc
	closing   bool

	stop chan struct{}
	wg   sync.WaitGroup
}

// Start settles egress for cfg and sets it up: On runs slirp4netns and opens the way out, Off closes it,
// Auto takes On where the host has a route out and slirp4netns starts, else Off (Line says why).
func Start(cfg Config) (*Egress, error) {
	if err := CheckMode(cfg.Mode); err != nil {
		return nil, err
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	conn, err := nft.Open(cfg.NodeNSPath)
	if err != nil {
		return nil, fmt.Errorf("egress: %w", err)
	}
	e := &Egress{cfg: cfg, conn: conn, stop: make(chan struct{})}
	if cfg.Mode == Off {
		e.line = "off (--pod-egress=off): pods reach nothing beyond the node; a connection out is refused at once, " +
			"names outside the cluster do not resolve"
		return e.closed()
	}
	err = hostRouteOut()
	if err == nil {
		e.slirp, err = e.startSlirp()
	}
	if err != nil {
		if cfg.Mode == On {
			conn.CloseLasting()
			return nil, fmt.Errorf("--pod-egress=on: %w", err)
		}
		e.line = "off: " + err.Error() + "; pods reach nothing beyond the node (--pod-egress=on requires it)"
		return e.closed()
	}
	e.on = true
	if e.hostAddrs, err = hostAddrs(); err == nil {
		err = e.openDoor()
	}
	if err != nil {
		e.Close()
		return nil, err
	}
	e.line = "on: pods reach what the host reaches, through slirp4netns (user-mode NAT out of the node namespace); " +
		"the host's own addresses are closed to them; --pod-egress=off keeps them offline"
	e.wg.Add(2)
	go e.supervise()
	go e.watchHostAddrs()
	return e, nil
}

// closed writes the closed door and returns e, or lets go of the namespace if that fails.
func (e *Egress) closed() (*Egress, error) {
	if err := e.closeDoor(); err != nil {
		e.conn.CloseLasting()
		return nil, err
	}
	return e, nil
}

// On says whether pods have a way out.
func (e *Egress) On() bool { return e.on }

// Line says in a line what pods reach, for `rayctl up`.
func (e *Egress) Line() string { return e.line }

// Close stops slirp4netns (pods lose their way out until the next Start) and lets go of the node
// namespace; the table stays for the namespace's life, replaced by the next Start.
func (e *Egress) Close() error {
	e.mu.Lock()
	if e.closing {
		e.mu.Unlock()
		return nil
	}
	e.closing = true
	close(e.stop)
	if e.slirp != nil {
		e.slirp.stop()
	}
	e.mu.Unlock()
	e.wg.Wait()
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.conn.CloseLasting()
}

// hostRouteOut checks that the host has a route to the world (a default route, in effect).
func hostRouteOut() error {
	if _, err := netlink.RouteGet(net.IPv4(192, 0, 2, 1)); err != nil {
		return fmt.Errorf("the host has no route out (%v)", err)
	}
	return nil
}

// hostAddrs lists the host's own IPv4 addresses, sorted: slirp4netns would reach the services bound
// there, so pods must not.
func hostAddrs() ([]net.IP, error) {
	addrs, err := netlink.AddrList(nil, netlink.FAMILY_V4)
	if err != nil {
		return nil, fmt.Errorf("egress: the host's addresses: %w", err)
	}
	var out []net.IP
	for _, a := range addrs {
		if ip := a.IP.To4(); ip != nil && !ip.IsLoopback() {
			out = append(out, ip)
		}
	}
	slices.SortFunc(out, func(a, b net.IP) int { return bytes.Compare(a, b) })
	return slices.CompactFunc(out, net.IP.Equal), nil
}

// closeDoor writes the table of a node without egress: what leaves the pods' bridge for anything beyond
// the pods' range is refused before routing, at once.
func (e *Egress) closeDoor() error {
	c := e.conn
	t := nft.ReplaceTable(c, &nftables.Table{Family: nftables.TableFamilyIPv4, Name: Table})
	pre := nft.BaseChain(c, t, "prerouting", nftables.ChainTypeFilter, nftables.ChainHookPrerouting, nftables.ChainPriorityFilter, nil)
	out := nft.Cat(nft.InIf(e.cfg.Bridge), nft.DaddrIn(expr.CmpOpNeq, e.cfg.Subnet))
	nft.Add(c, pre, out, nft.RejectTCP())
	nft.Add(c, pre, out, nft.Reject())
	if err := c.Flush(); err != nil {
		return fmt.Errorf("egress: the node namespace's rules: %w", err)
	}
	return nil
}

// openDoor writes the table of a node with egress: pods' connections leave by the uplink masqueraded,
// except to the host's own addresses, slirp4netns's range and ClusterIPs (refused); nothing comes in by
// the uplink that is not a reply. e.mu is held or the door not yet shared.
func (e *Egress) openDoor() error {
	c := e.conn
	t := nft.ReplaceTable(c, &nftables.Table{Family: nftables.TableFamilyIPv4, Name: Table})
	post := nft.BaseChain(c, t, "postrouting", nftables.ChainTypeNAT, nftables.ChainHookPostrouting, nftables.ChainPriorityNATSource, nil)
	nft.Add(c, post, nft.OutIf(Uplink), nft.Masquerade)

	fwd := nft.BaseChain(c, t, "forward", nftables.ChainTypeFilter, nftables.ChainHookForward, nftables.ChainPriorityFilter, nil)
	closed := []*net.IPNet{slirpNet, linkLocalNet}
	if e.cfg.ServiceCIDR != nil {
		closed = append(closed, e.cfg.ServiceCIDR)
	}
	for _, ip := range e.hostAddrs {
		closed = append(closed, &net.IPNet{IP: ip, Mask: net.CIDRMask(32, 32)})
	}
	for _, n := range closed {
		to := nft.Cat(nft.OutIf(Uplink), nft.DaddrIn(expr.CmpOpEq, n))
		nft.Add(c, fwd, to, nft.RejectTCP())
		nft.Add(c, fwd, to, nft.Reject())
	}
	for _, ch := range []*nftables.Chain{fwd,
		nft.BaseChain(c, t, "input", nftables.ChainTypeFilter, nftables.ChainHookInput, nftables.ChainPriorityFilter, nil)} {
		nft.Add(c, ch, nft.InIf(Uplink), nft.Established(), nft.Accept)
		nft.Add(c, ch, nft.InIf(Uplink), nft.Drop)
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("egress: the node namespace's rules: %w", err)
	}
	return nil
}

// watchHostAddrs rewrites the rules when the host's addresses change (a new Wi-Fi network, a VPN).
func (e *Egress) watchHostAddrs() {
	defer e.wg.Done()
	for {
		updates := make(chan netlink.AddrUpdate, 16)
		done := make(chan struct{})
		err := netlink.AddrSubscribe(updates, done)
		if err != nil {
			e.cfg.Logf("egress: cannot follow the host's addresses (%v); the ones at start stay closed", err)
			return
		}
		// An address added before the subscription took is not lost.
		e.refreshHostAddrs()
		for open := true; open; {
			select {
			case <-e.stop:
				close(done)
				return
			case _, open = <-updates:
			}
			e.refreshHostAddrs()
		}
		close(done)
		// The subscription ended: subscribe again, not in a busy loop.
		select {
		case <-e.stop:
			return
		case <-time.After(time.Second):
		}
	}
}

// refreshHostAddrs rewrites the rules if the host's addresses are not the ones closed. What cannot be
// read or written keeps the rules as they are (and is tried again at the next change).
func (e *Egress) refreshHostAddrs() {
	now, err := hostAddrs()
	if err != nil {
		e.cfg.Logf("%v", err)
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closing || slices.EqualFunc(now, e.hostAddrs, net.IP.Equal) {
		return
	}
	was := e.hostAddrs
	e.hostAddrs = now
	if err := e.openDoor(); err != nil {
		e.hostAddrs = was
		e.cfg.Logf("%v", err)
	}
}

// slirpProc is one run of slirp4netns.
type slirpProc struct {
	cmd   *exec.Cmd
	exitW *os.File      // slirp4netns exits when this closes (also when rayctl dies)
	done  chan struct{} // closed once it has exited, err then set
	err   error
}

// startSlirp runs slirp4netns for the node namespace and waits for its tap.
func (e *Egress) startSlirp() (*slirpProc, error) {
	path := e.cfg.Slirp4netns
	if path == "" {
		var err error
		if path, err = exec.LookPath("slirp4netns"); err != nil {
			return nil, errors.New("slirp4netns is not installed (Debian, Ubuntu: apt install slirp4netns; Fedora: dnf install slirp4netns)")
		}
	}
	readyR, readyW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer readyR.Close()
	exitR, exitW, err := os.Pipe()
	if err != nil {
		readyW.Close()
		return nil, err
	}
	cmd := exec.Command(path, "--configure", "--mtu=65520", "--disable-host-loopback", "--enable-sandbox", "--enable-seccomp",
		"--netns-type=path", "--ready-fd=3", "--exit-fd=4", e.cfg.NodeNSPath, Uplink)
	cmd.ExtraFiles = []*os.File{readyW, exitR}
	// Its own process group: a ^C to `rayctl up` stops rayctl, which stops slirp4netns in order.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	tail := &tailBuffer{max: 2048}
	var logs io.Writer = tail
	if e.cfg.LogPath != "" {
		if f, err := os.OpenFile(e.cfg.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600); err == nil {
			defer f.Close()
			logs = io.MultiWriter(tail, f)
		}
	}
	cmd.Stdout, cmd.Stderr = logs, logs
	err = cmd.Start()
	readyW.Close()
	exitR.Close()
	if err != nil {
		exitW.Close()
		return nil, fmt.Errorf("starting slirp4netns: %w", err)
	}
	p := &slirpProc{cmd: cmd, exitW: exitW, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	ready := make(chan error, 1)
	go func() {
		b := make([]byte, 1)
		_, err := readyR.Read(b)
		ready <- err
	}()
	var why string
	select {
	case err := <-ready:
		if err == nil {
			return p, nil
		}
		why = "stopped before its network was up"
	case <-p.done:
		why = "failed"
	case <-time.After(slirpReadyTimeout):
		why = "made no network in " + slirpReadyTimeout.String()
	}
	p.stop()
	return nil, fmt.Errorf("slirp4netns %s: %s", why, tail.reason())
}

// stop makes slirp4netns exit (its exit fd closed, killed if it lingers) and waits for it.
func (p *slirpProc) stop() {
	p.exitW.Close()
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// supervise starts slirp4netns again whenever it exits, until Close.
func (e *Egress) supervise() {
	defer e.wg.Done()
	for {
		e.mu.Lock()
		p := e.slirp
		e.mu.Unlock()
		select {
		case <-e.stop:
			return
		case <-p.done:
		}
		p.exitW.Close()
		if e.stopping() {
			return
		}
		e.cfg.Logf("egress: slirp4netns exited (%v): pods have no way out until it is back", p.err)
		for {
			select {
			case <-e.stop:
				return
			case <-time.After(time.Second):
			}
			e.mu.Lock()
			if e.closing {
				e.mu.Unlock()
				return
			}
			np, err := e.startSlirp()
			if err == nil {
				e.slirp = np
			}
			e.mu.Unlock()
			if err == nil {
				e.cfg.Logf("egress: slirp4netns is back")
				break
			}
			e.cfg.Logf("egress: %v", err)
		}
	}
}

// stopping says whether Close has begun.
func (e *Egress) stopping() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.closing
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = t.b[len(t.b)-t.max:]
	}
	return len(p), nil
}

// reason is the first line of slirp4netns's output that says what went wrong (not a warning, not its
// child's exit), with what to do when it is the tun device ("no output" when there is none).
func (t *tailBuffer) reason() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, l := range strings.Split(string(t.b), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "WARNING:") || strings.HasPrefix(l, "child failed") {
			continue
		}
		if strings.Contains(l, "/dev/net/tun") {
			l += " (slirp4netns needs /dev/net/tun readable and writable by you, as most distributions ship it: mode 0666)"
		}
		return l
	}
	return "no output"
}
