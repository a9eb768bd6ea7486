package gatewayproxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"sync"
	"time"
)

// BackendHeader is the response header that names the backend a request went to (namespace/service:port).
const BackendHeader = "X-Rayctl-Gateway-Backend"

// Proxy serves a Table: one HTTP server per port on each bind address, replaced as a whole on each
// Update (rules are swapped atomically; ports opened and closed to match).
type Proxy struct {
	// BindIPs are the addresses each port listens on (the pod's IP and its loopback; never a wildcard).
	BindIPs []string
	// Logger receives listener errors; nil logs to the standard logger.
	Logger *log.Logger
	// Dial connects to backends; nil uses a net.Dialer.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)

	mu        sync.Mutex
	ports     map[int32]*portServer
	loaded    bool
	transport http.RoundTripper
}

// portServer is what one port serves: its current rules and its servers.
type portServer struct {
	port    int32
	mu      sync.RWMutex
	rules   []*rule
	servers []*http.Server
}

// rule is a compiled Rule with its weighted round-robin state.
type rule struct {
	Rule
	m        *matcher
	timeouts parsedTimeouts
	// Smooth weighted round robin (as nginx's): each pick adds every backend's weight to its current
	// value, takes the largest and subtracts the total from it, so any run of sum(weights) picks gives
	// each backend exactly its weight.
	mu      sync.Mutex
	current []int64
}

// Ready reports whether a Table has been loaded and every port listens.
func (p *Proxy) Ready() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.loaded
}

// Update makes the proxy serve t: rules are replaced at once; ports t adds are opened, ports it no longer
// has are closed (their in-flight requests finish). A port that cannot be opened is an error; the rest
// of t is served.
func (p *Proxy) Update(t *Table) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ports == nil {
		p.ports = map[int32]*portServer{}
	}
	if p.transport == nil {
		p.transport = p.newTransport()
	}
	var errs []error
	seen := map[int32]bool{}
	for _, port := range t.Ports {
		seen[port.Port] = true
		rules := make([]*rule, 0, len(port.Rules))
		for _, r := range port.Rules {
			ru, err := compileRule(r)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			rules = append(rules, ru)
		}
		ps := p.ports[port.Port]
		if ps == nil {
			ps = &portServer{port: port.Port}
			if err := p.listen(ps, port.Port); err != nil {
				errs = append(errs, err)
				continue
			}
			p.ports[port.Port] = ps
		}
		ps.mu.Lock()
		ps.rules = rules
		ps.mu.Unlock()
	}
	for n, ps := range p.ports {
		if !seen[n] {
			for _, s := range ps.servers {
				go func() {
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					defer cancel()
					_ = s.Shutdown(ctx)
				}()
			}
			delete(p.ports, n)
		}
	}
	p.loaded = len(errs) == 0
	return errors.Join(errs...)
}

// Close stops every server at once.
func (p *Proxy) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, ps := range p.ports {
		for _, s := range ps.servers {
			_ = s.Close()
		}
	}
	p.ports = nil
}

func (p *Proxy) listen(ps *portServer, port int32) error {
	var ls []net.Listener
	for _, ip := range p.BindIPs {
		l, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(int(port))))
		if err != nil {
			for _, l := range ls {
				l.Close()
			}
			return fmt.Errorf("listening on port %d: %w", port, err)
		}
		ls = append(ls, l)
	}
	for _, l := range ls {
		s := &http.Server{Handler: p.handler(ps), ReadHeaderTimeout: 30 * time.Second, ErrorLog: p.Logger}
		ps.servers = append(ps.servers, s)
		go func() {
			if err := s.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
				p.logf("port %d: %v", port, err)
			}
		}()
	}
	return nil
}

func (p *Proxy) logf(format string, args ...any) {
	if p.Logger != nil {
		p.Logger.Printf(format, args...)
	} else {
		log.Printf(format, args...)
	}
}

func (p *Proxy) newTransport() http.RoundTripper {
	dial := p.Dial
	if dial == nil {
		dial = (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	return &http.Transport{Proxy: nil, DialContext: dial, MaxIdleConnsPerHost: 64, IdleConnTimeout: 90 * time.Second}
}

// proxied is what the handler hands the reverse proxy with a request: the backend chosen and the
// changes the filters make to its response.
type proxied struct {
	b        *Backend
	response []*HeaderModifier
}

type proxiedKey struct{}

// handler routes the requests of one port.
func (p *Proxy) handler(ps *portServer) http.Handler {
	rp := &httputil.ReverseProxy{
		Transport: p.transport,
		Rewrite: func(pr *httputil.ProxyRequest) {
			b := pr.In.Context().Value(proxiedKey{}).(*proxied).b
			pr.SetURL(&url.URL{Scheme: "http", Host: b.Addr})
			pr.Out.Host = pr.In.Host // the Gateway API keeps the client's Host (or a URLRewrite's)
			pr.SetXForwarded()
		},
		ModifyResponse: func(resp *http.Response) error {
			for _, m := range resp.Request.Context().Value(proxiedKey{}).(*proxied).response {
				m.apply(resp.Header)
			}
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			b := r.Context().Value(proxiedKey{}).(*proxied).b
			if errors.Is(err, context.DeadlineExceeded) {
				http.Error(w, "gateway: backend "+b.Name+" did not answer within the route's timeout", http.StatusGatewayTimeout)
				return
			}
			p.logf("backend %s (%s): %v", b.Name, b.Addr, err)
			http.Error(w, "gateway: backend "+b.Name+" unreachable", http.StatusBadGateway)
		},
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ps.mu.RLock()
		rules := ps.rules
		ps.mu.RUnlock()
		host := hostOnly(r.Host)
		for _, ru := range rules {
			if hostMatches(ru.Hostnames, host) && ru.m.matches(r) {
				p.serve(w, r, ps.port, ru, rp)
				return
			}
		}
		http.NotFound(w, r)
	})
}

// serve answers r, which ru routes, on the listener port: the rule's filters, its backend (with that
// backend's filters) and its timeouts.
func (p *Proxy) serve(w http.ResponseWriter, r *http.Request, port int32, ru *rule, rp *httputil.ReverseProxy) {
	if ru.Error != "" {
		http.Error(w, "gateway: route "+ru.Route+": "+ru.Error, http.StatusInternalServerError)
		return
	}
	ctx, cancel := withTimeout(r.Context(), ru.timeouts.request)
	defer cancel()
	prefix := ""
	if ru.Match.PathType == PathPrefix {
		prefix = ru.Match.Path
	}
	x := &exchange{out: r.Clone(ctx)}
	applyFilters(x, ru.Filters, prefix, p.mirror)
	if x.redirect == nil {
		b := ru.pick()
		if b == nil {
			http.Error(w, "gateway: route "+ru.Route+" has no backend with a weight", http.StatusInternalServerError)
			return
		}
		w.Header().Set(BackendHeader, b.Name)
		if b.Addr == "" {
			http.Error(w, "gateway: backend "+b.Name+" does not resolve", http.StatusInternalServerError)
			return
		}
		applyFilters(x, b.Filters, prefix, p.mirror)
		if x.redirect == nil {
			bctx, cancel := withTimeout(ctx, ru.timeouts.backend)
			defer cancel()
			rp.ServeHTTP(w, x.out.WithContext(context.WithValue(bctx, proxiedKey{}, &proxied{b: b, response: x.response})))
			return
		}
	}
	for _, m := range x.response {
		m.apply(w.Header())
	}
	code := x.redirect.StatusCode
	if code == 0 {
		code = http.StatusFound
	}
	http.Redirect(w, x.out, x.redirect.location(x.out, port, prefix), code)
}

// mirror sends a copy of r to m's backend and drops the answer.
func (p *Proxy) mirror(m *Mirror, r *http.Request) {
	c := mirrorCopy(r)
	if c == nil {
		p.logf("mirror %s: request body over %d bytes not mirrored", m.Name, maxMirroredBody)
		return
	}
	c.RequestURI = ""
	c.URL = &url.URL{Scheme: "http", Host: m.Addr, Path: r.URL.Path, RawPath: r.URL.RawPath, RawQuery: r.URL.RawQuery}
	go func() {
		ctx, cancel := context.WithTimeout(c.Context(), 30*time.Second)
		defer cancel()
		resp, err := p.transport.RoundTrip(c.WithContext(ctx))
		if err != nil {
			p.logf("mirror %s (%s): %v", m.Name, m.Addr, err)
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}()
}

// pick chooses the next backend by smooth weighted round robin; nil when no weight is above 0.
func (r *rule) pick() *Backend {
	r.mu.Lock()
	defer r.mu.Unlock()
	var total int64
	best := -1
	for i, b := range r.Backends {
		if b.Weight <= 0 {
			continue
		}
		total += int64(b.Weight)
		r.current[i] += int64(b.Weight)
		if best < 0 || r.current[i] > r.current[best] {
			best = i
		}
	}
	if best < 0 {
		return nil
	}
	r.current[best] -= total
	return &r.Backends[best]
}
