package dns

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/rayctl/rayctl/pkg/runtime/network"
)

// UserAgent is the user agent the server's API requests carry.
const UserAgent = "rayctl/dns"

// Defaults for Options fields left zero.
const (
	// DefaultZone is the cluster domain.
	DefaultZone = "cluster.local"
	// DefaultTTL is the TTL, in seconds, of the zone's records and of its negative answers.
	DefaultTTL = 5
	// DefaultForwardTimeout bounds each attempt at an upstream resolver.
	DefaultForwardTimeout = 2 * time.Second
	// DefaultResolvConf is where the host's upstream resolvers are read from.
	DefaultResolvConf = "/etc/resolv.conf"
)

// Options configures a Server.
type Options struct {
	// Zone is the cluster domain; DefaultZone when empty.
	Zone string
	// Listen are host:port addresses, each served over both UDP and TCP. Port 0 picks a free port (the same
	// one for UDP and TCP). At least one is required.
	Listen []string
	// FreeBind lets Listen name an address no interface has yet (Linux IP_FREEBIND), such as the pod bridge's
	// gateway before the bridge exists; the server answers there as soon as the address is assigned.
	FreeBind bool
	// NetNS, when set, is the network namespace (a namespace file's path) the Listen addresses are bound
	// in, such as rayctl's node namespace, where the pod bridge is; empty binds in this process's own.
	// Upstreams are reached from this process's own namespace either way.
	NetNS string
	// Upstreams are the resolvers ("ip" or "ip:port") names outside the zone are forwarded to. Nil reads the
	// nameservers of ResolvConf; empty forwards nothing (SERVFAIL). The server's own addresses are dropped.
	Upstreams []string
	// ResolvConf is the file Upstreams default from; DefaultResolvConf when empty.
	ResolvConf string
	// ForwardTimeout bounds each upstream attempt; DefaultForwardTimeout when zero.
	ForwardTimeout time.Duration
	// TTL is the TTL of the zone's records, in seconds; DefaultTTL when zero.
	TTL uint32
	// RESTConfig reaches the API server the records come from.
	RESTConfig *rest.Config
	// ClusterIPs makes a Service with a ClusterIP answer with it, as on a cluster: set it where a Service
	// proxy (pkg/serviceproxy) makes ClusterIPs carry traffic. <svc>.<ns>.svc then resolves to the
	// ClusterIP, and its SRV records name the Service itself and its port. Headless Services answer as
	// before (their ready endpoints, SRV records by endpoint, endpoint host names). Without it every
	// Service answers as a headless one.
	ClusterIPs bool
	// AllowClient, when set, says whose queries are answered: UDP queries from anyone else get REFUSED,
	// and TCP connections from anyone else are closed at once. The cluster's DNS serves pods, not every
	// local user who can reach the pod bridge's address (their queries come from the gateway itself).
	AllowClient func(net.IP) bool
}

// Server is the cluster DNS server. New binds its sockets; Run serves them.
type Server struct {
	zone      string // "cluster.local." lower case
	ttl       uint32
	timeout   time.Duration
	upstreams []string
	records   *records
	servers   []*dns.Server
	addrs     []string
	allow     func(net.IP) bool
	vips      bool // Options.ClusterIPs
	closeOnce sync.Once
}

// New binds every Listen address (UDP and TCP) and prepares the informers; nothing is served before Run.
func New(opts Options) (*Server, error) {
	if len(opts.Listen) == 0 {
		return nil, errors.New("dns: no listen address")
	}
	if opts.RESTConfig == nil {
		return nil, errors.New("dns: no REST config")
	}
	s := &Server{
		zone:    dns.Fqdn(strings.ToLower(strings.Trim(firstNonEmpty(opts.Zone, DefaultZone), "."))),
		ttl:     opts.TTL,
		timeout: opts.ForwardTimeout,
		allow:   opts.AllowClient,
		vips:    opts.ClusterIPs,
	}
	if s.ttl == 0 {
		s.ttl = DefaultTTL
	}
	if s.timeout <= 0 {
		s.timeout = DefaultForwardTimeout
	}
	cfg := rest.CopyConfig(opts.RESTConfig)
	if cfg.UserAgent == "" {
		cfg.UserAgent = UserAgent
	}
	var err error
	if s.records, err = newRecords(cfg); err != nil {
		return nil, err
	}
	for _, addr := range opts.Listen {
		var pc net.PacketConn
		var l net.Listener
		err := network.Do(opts.NetNS, func() (err error) {
			pc, l, err = listenPair(addr, opts.FreeBind)
			return err
		})
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("dns: listen on %s: %w", addr, err)
		}
		s.addrs = append(s.addrs, pc.LocalAddr().String())
		if s.allow != nil {
			l = allowListener{Listener: l, allow: s.allow}
		}
		s.servers = append(s.servers, &dns.Server{PacketConn: pc, Handler: s}, &dns.Server{Listener: l, Handler: s})
	}
	ups := opts.Upstreams
	if ups == nil {
		ups, err = ReadUpstreams(firstNonEmpty(opts.ResolvConf, DefaultResolvConf))
		if err != nil {
			klog.V(1).InfoS("dns: no upstream resolvers", "err", err)
		}
	}
	s.upstreams = filterUpstreams(ups, s.addrs)
	return s, nil
}

// Addr is the first listen address as bound (with the chosen port), e.g. "127.0.0.1:40123".
func (s *Server) Addr() string { return s.addrs[0] }

// Addrs are all listen addresses as bound, in the order of Options.Listen.
func (s *Server) Addrs() []string { return append([]string(nil), s.addrs...) }

// Upstreams are the resolvers names outside the zone are forwarded to, as host:port.
func (s *Server) Upstreams() []string { return append([]string(nil), s.upstreams...) }

// Run watches the API server and answers queries until ctx ends, then closes the sockets. Until the caches
// are filled, questions about the zone get SERVFAIL (so clients retry) while forwarding already works.
func (s *Server) Run(ctx context.Context) error {
	defer s.Close()
	errc := make(chan error, len(s.servers))
	for _, srv := range s.servers {
		go func() { errc <- srv.ActivateAndServe() }()
	}
	go s.records.run(ctx)
	select {
	case <-ctx.Done():
		return nil
	case err := <-errc:
		return fmt.Errorf("dns: serving stopped: %w", err)
	}
}

// Close stops serving and releases the sockets; Run does it on return.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		for _, srv := range s.servers {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			if srv.ShutdownContext(ctx) != nil {
				// Never started: close the socket ourselves.
				if srv.PacketConn != nil {
					srv.PacketConn.Close()
				}
				if srv.Listener != nil {
					srv.Listener.Close()
				}
			}
			cancel()
		}
	})
}

// listenPair binds addr over UDP and TCP on one port.
func listenPair(addr string, freeBind bool) (net.PacketConn, net.Listener, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, nil, err
	}
	lc := network.ListenConfig(freeBind)
	var lastErr error
	for attempt := 0; attempt < 10; attempt++ {
		pc, err := lc.ListenPacket(context.Background(), "udp", addr)
		if err != nil {
			return nil, nil, err
		}
		_, bound, _ := net.SplitHostPort(pc.LocalAddr().String())
		l, err := lc.Listen(context.Background(), "tcp", net.JoinHostPort(host, bound))
		if err == nil {
			return pc, l, nil
		}
		pc.Close()
		lastErr = err
		if port != "0" {
			break
		}
	}
	return nil, nil, lastErr
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// allowed says whether addr (a query's source) may be answered.
func (s *Server) allowed(addr net.Addr) bool {
	if s.allow == nil {
		return true
	}
	ip := addrIP(addr)
	return ip != nil && s.allow(ip)
}

func addrIP(addr net.Addr) net.IP {
	switch a := addr.(type) {
	case *net.UDPAddr:
		return a.IP
	case *net.TCPAddr:
		return a.IP
	}
	return nil
}

// allowListener closes, as soon as they are accepted, connections from sources allow refuses.
type allowListener struct {
	net.Listener
	allow func(net.IP) bool
}

// Accept implements net.Listener.
func (l allowListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if ip := addrIP(c.RemoteAddr()); ip != nil && l.allow(ip) {
			return c, nil
		}
		c.Close()
	}
}
