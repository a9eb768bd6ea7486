package chain

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
)

// PathPrefix is where the API server serves the recorder. Requests are authenticated and authorized
// like any other non-resource URL (system:masters, or a role with nonResourceURLs /debug/chain/*).
const PathPrefix = "/debug/chain/"

// EventList is the answer of GET /debug/chain/events.
type EventList struct {
	// Size is the ring's capacity; Next the Seq the next event will get.
	Size   int     `json:"size"`
	Next   uint64  `json:"next"`
	Events []Event `json:"events"`
}

// TraceResult is the answer of GET /debug/chain/trace.
type TraceResult struct {
	Steps []Step `json:"steps"`
}

// IsLongRunning reports whether a request to the recorder streams (the API server exempts it from
// its request timeout).
func IsLongRunning(r *http.Request) bool {
	return strings.HasPrefix(r.URL.Path, PathPrefix) && r.URL.Query().Get("watch") == "true"
}

// Handler serves the recorder under PathPrefix:
//
//	GET events?after=SEQ&kind=K&namespace=NS&name=N&component=C&hop=H   kept events, oldest first
//	GET events?watch=true&…                                            kept events, then new ones as they come (JSON lines)
//	GET trace?kind=K&namespace=NS&name=N                                the causal timeline of one object
//	GET controllers                                                     the controllers, their caches and queues
func (r *Recorder) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodGet {
			http.Error(w, "only GET", http.StatusMethodNotAllowed)
			return
		}
		q := req.URL.Query()
		switch strings.TrimPrefix(req.URL.Path, PathPrefix) {
		case "events":
			f, err := filterFrom(q.Get)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			if q.Get("watch") == "true" {
				r.stream(w, req, f)
				return
			}
			r.mu.Lock()
			next := r.next
			r.mu.Unlock()
			writeJSON(w, EventList{Size: r.Size(), Next: next, Events: r.Events(f)})
		case "trace":
			if q.Get("kind") == "" || q.Get("name") == "" {
				http.Error(w, "trace needs kind and name", http.StatusBadRequest)
				return
			}
			writeJSON(w, TraceResult{Steps: Trace(r.Events(Filter{}), q.Get("kind"), q.Get("namespace"), q.Get("name"))})
		case "controllers":
			writeJSON(w, r.Controllers())
		default:
			http.NotFound(w, req)
		}
	})
}

func filterFrom(get func(string) string) (Filter, error) {
	f := Filter{Kind: get("kind"), Namespace: get("namespace"), Name: get("name"), Component: get("component"), Hop: Hop(get("hop"))}
	if a := get("after"); a != "" {
		n, err := strconv.ParseUint(a, 10, 64)
		if err != nil {
			return f, err
		}
		f.After = n
	}
	return f, nil
}

// stream writes the kept events that pass f, then each new one, one JSON object a line, until the
// client goes away.
func (r *Recorder) stream(w http.ResponseWriter, req *http.Request, f Filter) {
	flusher, _ := w.(http.Flusher)
	sub := r.Subscribe(4096)
	defer sub.Close()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w)
	last := f.After
	for _, e := range r.Events(f) {
		if enc.Encode(e) != nil {
			return
		}
		last = e.Seq
	}
	if flusher != nil {
		flusher.Flush()
	}
	for {
		select {
		case <-req.Context().Done():
			return
		case e := <-sub.C():
			if e.Seq <= last || !f.Match(&e) {
				continue
			}
			if enc.Encode(e) != nil {
				return
			}
			if flusher != nil && len(sub.C()) == 0 {
				flusher.Flush()
			}
		}
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
