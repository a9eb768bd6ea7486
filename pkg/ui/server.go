// Package ui serves `rayctl ui`: a page on loopback that lists the RayJobs and RayClusters live and
// draws an object's trigger chain as a sequence diagram, hop by hop as they happen, with the latency
// of each hop and `rayctl diagnose`'s checklist. The page reaches the API server and the chain
// recorder only through this server, which uses rayctl's credentials; the page's assets are embedded.
//
// Every request must come with the one-time token printed at start (exchanged for an HttpOnly,
// SameSite=Strict cookie) and a Host header naming the server on loopback; a POST also needs the
// page's CSRF header.
package ui

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net"
	"net/http"
	"strconv"
	"time"

	rayclient "github.com/ray-project/kuberay/ray-operator/pkg/client/clientset/versioned"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/rayctl/rayctl/pkg/chain"
)

//go:embed assets
var assets embed.FS

// Options configure a Server.
type Options struct {
	// Config is how the server reaches the API server (rayctl's admin kubeconfig).
	Config *rest.Config
	// DemoNamespace is where the page's demo button applies the demo RayJob.
	DemoNamespace string
	// Port is the loopback port to listen on; 0 picks a free one.
	Port int
}

// Server is a running `rayctl ui`.
type Server struct {
	opts    Options
	ln      net.Listener
	guard   *guard
	kube    kubernetes.Interface
	ray     rayclient.Interface
	chain   *chainFeed
	objects *objectFeed
	index   *template.Template
}

// New listens on 127.0.0.1 and prepares the server; Serve runs it.
func New(opts Options) (*Server, error) {
	kube, err := kubernetes.NewForConfig(opts.Config)
	if err != nil {
		return nil, err
	}
	ray, err := rayclient.NewForConfig(opts.Config)
	if err != nil {
		return nil, err
	}
	feed, err := newChainFeed(opts.Config)
	if err != nil {
		return nil, err
	}
	index, err := template.ParseFS(assets, "assets/index.html")
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(opts.Port)))
	if err != nil {
		return nil, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	return &Server{opts: opts, ln: ln, guard: newGuard(port), kube: kube, ray: ray, chain: feed,
		objects: newObjectFeed(ray), index: index}, nil
}

// URL is the address to open, with the token.
func (s *Server) URL() string {
	return fmt.Sprintf("http://127.0.0.1:%d/?token=%s", s.guard.port, s.guard.token)
}

// Serve follows the cluster and answers the page until ctx ends.
func (s *Server) Serve(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go s.chain.run(ctx)
	if err := s.objects.start(ctx); err != nil {
		s.ln.Close()
		return err
	}
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second,
		BaseContext: func(net.Listener) context.Context { return ctx }}
	go func() {
		<-ctx.Done()
		sctx, scancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer scancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(s.ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Handler is the server's routes behind its guard.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	static, _ := fs.Sub(assets, "assets")
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	mux.HandleFunc("GET /{$}", s.serveIndex)
	mux.HandleFunc("GET /api/objects", s.serveObjects)
	mux.HandleFunc("GET /api/chain", s.serveChain)
	mux.HandleFunc("GET /api/diagnose", s.serveDiagnose)
	mux.HandleFunc("POST /api/demo", s.serveDemo)
	return s.guard.wrap(mux)
}

func (s *Server) serveIndex(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_ = s.index.Execute(w, map[string]string{"CSRF": s.guard.csrf, "CSRFHeader": CSRFHeader})
}

// sse is a Server-Sent Events stream.
type sse struct {
	w http.ResponseWriter
	f http.Flusher
}

// startSSE answers r with an event stream; nil if w cannot stream.
func startSSE(w http.ResponseWriter) *sse {
	f, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return nil
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	f.Flush()
	return &sse{w: w, f: f}
}

// send writes one event of type name with v as JSON.
func (s *sse) send(name string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(s.w, "event: %s\ndata: %s\n\n", name, b); err != nil {
		return err
	}
	s.f.Flush()
	return nil
}

// objectParams reads kind, namespace and name, answering 400 (with the parameter's name) if one is
// missing or the kind is not one the page shows.
func objectParams(w http.ResponseWriter, r *http.Request) (kind, ns, name string, ok bool) {
	q := r.URL.Query()
	kind, ns, name = q.Get("kind"), q.Get("namespace"), q.Get("name")
	for _, p := range []struct{ key, val string }{{"kind", kind}, {"namespace", ns}, {"name", name}} {
		if p.val == "" {
			http.Error(w, "query parameter "+p.key+" is required", http.StatusBadRequest)
			return "", "", "", false
		}
	}
	if kind != "RayJob" && kind != "RayCluster" {
		http.Error(w, "query parameter kind: want RayJob or RayCluster, not "+strconv.Quote(kind), http.StatusBadRequest)
		return "", "", "", false
	}
	return kind, ns, name, true
}

// serveChain streams the chain of one object (a RayJob's with its RayCluster's): a view now, and a new
// one whenever the chain grows.
func (s *Server) serveChain(w http.ResponseWriter, r *http.Request) {
	// Whether a rayctl controller acts on a kind is asked once a request: it is fixed by rayctl up's flags.
	external := map[string]bool{}
	s.stream(w, r, "chain", 100*time.Millisecond, func(kind, ns, name string) any {
		ext, ok := external[kind]
		if !ok {
			ext, _ = chain.External(r.Context(), s.chain.client, kind)
			external[kind] = ext
		}
		return s.chain.view(kind, ns, name, ext, s.objects.related(kind, ns, name)...)
	})
}

// stream answers a request about one object (kind, namespace and name in its query) with events named
// event: compute's answer now, and again after each change of the chain (settle after it, so a burst
// of hops is drawn once), sent when it differs from the last.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, event string, settle time.Duration, compute func(kind, ns, name string) any) {
	kind, ns, name, ok := objectParams(w, r)
	if !ok {
		return
	}
	out := startSSE(w)
	if out == nil {
		return
	}
	ctx := r.Context()
	var last []byte
	for {
		changed := s.chain.wait()
		v := compute(kind, ns, name)
		if ctx.Err() != nil {
			return
		}
		if b, _ := json.Marshal(v); string(b) != string(last) {
			if out.send(event, v) != nil {
				return
			}
			last = b
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(settle):
		}
	}
}
