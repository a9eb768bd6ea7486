package gatewayproxy

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// echo is a backend that answers the request it got: its method, path, Host and headers (name=values,
// one a line, sorted by http.Header.Write), and sets X-Backend-Header: from-backend on the response.
// A request to /slow is sent on got when it arrives, then waits for release (or the request's end)
// before answering.
func echo(t *testing.T, release <-chan struct{}) (addr string, got chan *http.Request) {
	t.Helper()
	got = make(chan *http.Request, 16)
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			got <- r
			select {
			case <-release:
			case <-r.Context().Done():
				return
			}
		}
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Backend-Header", "from-backend")
		w.Header().Set("X-Drop-Me", "x")
		fmt.Fprintf(w, "%s %s %s %s\n", r.Method, r.URL.RequestURI(), r.Host, body)
		_ = r.Header.Write(w)
		got <- r
	}))
	t.Cleanup(s.Close)
	return strings.TrimPrefix(s.URL, "http://"), got
}

func serveTable(t *testing.T, rules ...Rule) string {
	t.Helper()
	port := freePort(t)
	p := &Proxy{BindIPs: []string{"127.0.0.1"}}
	if err := p.Update(&Table{Ports: []Port{{Port: port, Rules: rules}}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return fmt.Sprintf("http://127.0.0.1:%d", port)
}

func do(t *testing.T, method, url string, header map[string]string, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	for k, v := range header {
		req.Header.Set(k, v)
	}
	c := &http.Client{Transport: &http.Transport{Proxy: nil}, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func readBody(resp *http.Response) string {
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// The filters the Gateway API's core and extended conformance ask for, as the proxy applies them.
func TestFilters(t *testing.T) {
	addr, got := echo(t, nil)
	mirrorAddr, mirrored := echo(t, nil)
	prefix := Match{PathType: PathPrefix, Path: "/api"}
	be := []Backend{{Name: "ns/echo:80", Addr: addr, Weight: 1}}
	base := serveTable(t,
		Rule{Route: "ns/headers", Match: Match{PathType: PathPrefix, Path: "/headers"}, Backends: be, Filters: []Filter{
			{Type: FilterRequestHeaderModifier, Headers: &HeaderModifier{
				Set: []Header{{Name: "X-Set", Value: "set"}}, Add: []Header{{Name: "X-Add", Value: "added"}}, Remove: []string{"x-remove"}}},
			{Type: FilterResponseHeaderModifier, Headers: &HeaderModifier{
				Set: []Header{{Name: "X-Backend-Header", Value: "changed"}}, Add: []Header{{Name: "X-Response-Add", Value: "1"}}, Remove: []string{"X-Drop-Me"}}},
		}},
		Rule{Route: "ns/rewrite-prefix", Match: prefix, Backends: be, Filters: []Filter{
			{Type: FilterURLRewrite, Rewrite: &Rewrite{Hostname: "rewritten.example", Path: &PathModifier{Type: ReplacePrefixMatch, Value: "/v2"}}}}},
		Rule{Route: "ns/rewrite-full", Match: Match{PathType: PathPrefix, Path: "/full"}, Backends: be, Filters: []Filter{
			{Type: FilterURLRewrite, Rewrite: &Rewrite{Path: &PathModifier{Type: ReplaceFullPath, Value: "/replaced"}}}}},
		Rule{Route: "ns/redirect", Match: Match{PathType: PathPrefix, Path: "/old"}, Filters: []Filter{
			{Type: FilterRequestRedirect, Redirect: &Redirect{Path: &PathModifier{Type: ReplacePrefixMatch, Value: "/new"}, StatusCode: 301}}}},
		Rule{Route: "ns/https", Match: Match{PathType: PathPrefix, Path: "/secure"}, Filters: []Filter{
			{Type: FilterRequestRedirect, Redirect: &Redirect{Scheme: "https", Hostname: "example.com"}}}},
		Rule{Route: "ns/port", Match: Match{PathType: PathPrefix, Path: "/port"}, Filters: []Filter{
			{Type: FilterRequestRedirect, Redirect: &Redirect{Port: 8443}}}},
		Rule{Route: "ns/mirror", Match: Match{PathType: PathPrefix, Path: "/mirror"}, Backends: be, Filters: []Filter{
			{Type: FilterRequestMirror, Mirror: &Mirror{Name: "ns/mirror:80", Addr: mirrorAddr, Fraction: 1}}}},
		Rule{Route: "ns/per-backend", Match: Match{PathType: PathPrefix, Path: "/per-backend"},
			Backends: []Backend{{Name: "ns/echo:80", Addr: addr, Weight: 1, Filters: []Filter{
				{Type: FilterRequestHeaderModifier, Headers: &HeaderModifier{Set: []Header{{Name: "X-Backend", Value: "echo"}}}}}}}},
		Rule{Route: "ns/ext", Match: Match{PathType: PathPrefix, Path: "/ext"}, Backends: be, Error: "filter extensionRef example.com/Thing does not resolve"},
	)

	resp := do(t, http.MethodGet, base+"/headers", map[string]string{"X-Set": "old", "X-Add": "first", "X-Remove": "gone"}, "")
	r := <-got
	if r.Header.Get("X-Set") != "set" || strings.Join(r.Header.Values("X-Add"), ",") != "first,added" || r.Header.Get("X-Remove") != "" {
		t.Errorf("RequestHeaderModifier: the backend got X-Set %q, X-Add %q, X-Remove %q", r.Header.Get("X-Set"), r.Header.Values("X-Add"), r.Header.Get("X-Remove"))
	}
	if h := resp.Header; h.Get("X-Backend-Header") != "changed" || h.Get("X-Response-Add") != "1" || h.Get("X-Drop-Me") != "" {
		t.Errorf("ResponseHeaderModifier: the client got %v", h)
	}

	resp = do(t, http.MethodGet, base+"/api/items?x=1", nil, "")
	r = <-got
	if r.URL.RequestURI() != "/v2/items?x=1" || r.Host != "rewritten.example" {
		t.Errorf("URLRewrite ReplacePrefixMatch: the backend got %s (Host %s); want /v2/items?x=1 (Host rewritten.example)", r.URL.RequestURI(), r.Host)
	}
	for path, want := range map[string]string{"/api": "/v2", "/api/": "/v2/", "/full/a/b": "/replaced"} {
		do(t, http.MethodGet, base+path, nil, "")
		if r := <-got; r.URL.Path != want {
			t.Errorf("URLRewrite of %s: the backend got %s; want %s", path, r.URL.Path, want)
		}
	}

	for path, want := range map[string]struct {
		code     int
		location string
	}{
		"/old/page?q=1": {301, "http://127.0.0.1:" + strings.Split(base, ":")[2] + "/new/page?q=1"},
		"/secure/x":     {302, "https://example.com/secure/x"},
		"/port":         {302, "http://127.0.0.1:8443/port"},
	} {
		resp = do(t, http.MethodGet, base+path, nil, "")
		if resp.StatusCode != want.code || resp.Header.Get("Location") != want.location {
			t.Errorf("RequestRedirect of %s: %d Location %q; want %d %q", path, resp.StatusCode, resp.Header.Get("Location"), want.code, want.location)
		}
	}

	resp = do(t, http.MethodPost, base+"/mirror/m", nil, "payload")
	if body := readBody(resp); resp.StatusCode != 200 || !strings.HasPrefix(body, "POST /mirror/m 127.0.0.1") || !strings.Contains(body, "payload") {
		t.Errorf("a mirrored request's answer: %d %q", resp.StatusCode, body)
	}
	<-got
	select {
	case m := <-mirrored:
		if m.Method != http.MethodPost || m.URL.Path != "/mirror/m" {
			t.Errorf("the mirror got %s %s", m.Method, m.URL.Path)
		}
	case <-time.After(10 * time.Second):
		t.Error("the mirror got no copy of the request")
	}

	do(t, http.MethodGet, base+"/per-backend", nil, "")
	if r := <-got; r.Header.Get("X-Backend") != "echo" {
		t.Errorf("a backend's own filter: X-Backend %q", r.Header.Get("X-Backend"))
	}
	if resp = do(t, http.MethodGet, base+"/ext", nil, ""); resp.StatusCode != http.StatusInternalServerError || !strings.Contains(readBody(resp), "does not resolve") {
		t.Errorf("a rule whose filter does not resolve answered %d", resp.StatusCode)
	}
}

// A rule's request and backendRequest timeouts answer 504 when the backend is late; a zero duration is
// no timeout.
func TestTimeouts(t *testing.T) {
	release := make(chan struct{})
	addr, arrived := echo(t, release)
	be := []Backend{{Name: "ns/echo:80", Addr: addr, Weight: 1}}
	base := serveTable(t,
		Rule{Route: "ns/request", Match: Match{PathType: PathPrefix, Path: "/slow"}, Hostnames: []string{"request"}, Backends: be, Timeouts: &Timeouts{Request: "200ms"}},
		Rule{Route: "ns/backend", Match: Match{PathType: PathPrefix, Path: "/slow"}, Hostnames: []string{"backend"}, Backends: be, Timeouts: &Timeouts{Request: "0s", BackendRequest: "200ms"}},
		Rule{Route: "ns/none", Match: Match{PathType: PathPrefix, Path: "/"}, Backends: be, Timeouts: &Timeouts{Request: "0s"}},
	)
	for _, host := range []string{"request", "backend"} {
		req, _ := http.NewRequest(http.MethodGet, base+"/slow", nil)
		req.Host = host
		resp, err := (&http.Client{Transport: &http.Transport{Proxy: nil}}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if body := readBody(resp); resp.StatusCode != http.StatusGatewayTimeout || !strings.Contains(body, "timeout") {
			t.Errorf("%s timeout: %d %q; want 504", host, resp.StatusCode, body)
		}
		resp.Body.Close()
	}
	done := make(chan *http.Response, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodGet, base+"/slow", nil)
		req.Host = "none"
		resp, err := (&http.Client{Transport: &http.Transport{Proxy: nil}}).Do(req)
		if err == nil {
			done <- resp
		}
		close(done)
	}()
	// With no timeout the request reaches the backend and waits for its answer.
	for r := range arrived {
		if r.Host == "none" {
			break
		}
	}
	close(release)
	resp := <-done
	if resp == nil || resp.StatusCode != 200 {
		t.Fatalf("with a zero timeout: %v", resp)
	}
	resp.Body.Close()
}

func TestParseRefusesAFilterWithoutItsSettings(t *testing.T) {
	for _, table := range []string{
		`{"ports":[{"port":80,"rules":[{"match":{"pathType":"PathPrefix","path":"/"},"filters":[{"type":"RequestRedirect"}]}]}]}`,
		`{"ports":[{"port":80,"rules":[{"match":{"pathType":"PathPrefix","path":"/"},"filters":[{"type":"CORS"}]}]}]}`,
		`{"ports":[{"port":80,"rules":[{"match":{"pathType":"PathPrefix","path":"/"},"timeouts":{"request":"soon"}}]}]}`,
	} {
		if _, err := Parse([]byte(table)); err == nil {
			t.Errorf("Parse(%s) succeeded", table)
		}
	}
}
