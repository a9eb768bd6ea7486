package chainhooks

import (
	"net/http"
	"time"

	"github.com/rayctl/rayctl/pkg/chain"
)

// Transport wraps next (nil means http.DefaultTransport) so that every request made with the context of
// a reconcile wrapped by Reconciler is reported to that controller's sink as a DashboardCall.
func Transport(next http.RoundTripper) http.RoundTripper {
	if next == nil {
		next = http.DefaultTransport
	}
	return observedTransport{next: next}
}

type observedTransport struct{ next http.RoundTripper }

func (t observedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	r, ok := from(req.Context())
	if !ok {
		return t.next.RoundTrip(req)
	}
	start := time.Now()
	resp, err := t.next.RoundTrip(req)
	e := chain.Event{Hop: chain.DashboardCall, Object: r.h.keyRef(r.key), Duration: time.Since(start), Reconcile: r.h.passOf(r.key),
		Call: &chain.Call{Method: req.Method, URL: req.URL.String(), Path: req.URL.Path}}
	if resp != nil {
		e.Call.Code = resp.StatusCode
	}
	if err != nil {
		e.Error = err.Error()
	}
	r.h.emit(e)
	return resp, err
}
