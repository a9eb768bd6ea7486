package gatewayproxy

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// backend is an HTTP server that answers its name and the path it got.
func backend(t *testing.T, name string) string {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s %s %s", name, r.URL.Path, r.Host)
	}))
	t.Cleanup(s.Close)
	return strings.TrimPrefix(s.URL, "http://")
}

// newProxy is a Proxy on 127.0.0.1 and n ports the test has already opened (port 0, so no other
// process can take them between the choice and the proxy's listening): the proxy's Listen hands out
// those listeners.
func newProxy(t *testing.T, n int) (*Proxy, []int32) {
	t.Helper()
	ports := make([]int32, n)
	open := map[string]net.Listener{}
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		ports[i] = int32(l.Addr().(*net.TCPAddr).Port)
		open[l.Addr().String()] = l
	}
	p := &Proxy{BindIPs: []string{"127.0.0.1"}, Listen: func(_, addr string) (net.Listener, error) {
		if l, ok := open[addr]; ok {
			delete(open, addr)
			return l, nil
		}
		return nil, fmt.Errorf("the test opened no listener on %s", addr)
	}}
	t.Cleanup(p.Close)
	return p, ports
}

func get(t *testing.T, url string, header map[string]string) (int, string, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := (&http.Client{Transport: &http.Transport{Proxy: nil}}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header.Get(BackendHeader)
}

func TestProxyRoutesByPrecedenceHeadersAndWeights(t *testing.T) {
	a, b, c := backend(t, "a"), backend(t, "b"), backend(t, "c")
	p, ports := newProxy(t, 2)
	port := ports[0]
	table := &Table{Ports: []Port{{Port: port, Rules: []Rule{
		{Route: "ns/exact", Match: Match{PathType: PathExact, Path: "/exact"}, Backends: []Backend{{Name: "c", Addr: c, Weight: 1}}},
		{Route: "ns/header", Match: Match{PathType: PathPrefix, Path: "/split", Headers: []HeaderMatch{{Type: HeaderExact, Name: "X-Canary", Value: "yes"}}}, Backends: []Backend{{Name: "c", Addr: c, Weight: 1}}},
		{Route: "ns/split", Match: Match{PathType: PathPrefix, Path: "/split"}, Backends: []Backend{{Name: "a", Addr: a, Weight: 3}, {Name: "b", Addr: b, Weight: 1}}},
		{Route: "ns/broken", Match: Match{PathType: PathPrefix, Path: "/broken"}, Backends: []Backend{{Name: "gone", Weight: 1}}},
		{Route: "ns/zero", Match: Match{PathType: PathPrefix, Path: "/zero"}, Backends: []Backend{{Name: "a", Addr: a, Weight: 0}}},
	}}}}
	if err := p.Update(table); err != nil {
		t.Fatal(err)
	}
	base := fmt.Sprintf("http://127.0.0.1:%d", port)

	if code, body, _ := get(t, base+"/exact", nil); code != 200 || !strings.HasPrefix(body, "c /exact") {
		t.Fatalf("/exact: %d %q", code, body)
	}
	if code, _, _ := get(t, base+"/exact/more", nil); code != http.StatusNotFound {
		t.Fatalf("/exact/more matched the Exact rule or another: %d", code)
	}
	if code, body, _ := get(t, base+"/split/x", map[string]string{"X-Canary": "yes"}); code != 200 || !strings.HasPrefix(body, "c ") {
		t.Fatalf("the header match: %d %q", code, body)
	}
	// /splitter is not under the /split prefix: path elements match whole.
	if code, _, _ := get(t, base+"/splitter", nil); code != http.StatusNotFound {
		t.Fatalf("/splitter: %d", code)
	}
	counts := map[string]int{}
	for range 40 {
		code, _, which := get(t, base+"/split/y", nil)
		if code != 200 {
			t.Fatalf("/split/y: %d", code)
		}
		counts[which]++
	}
	if counts["a"] != 30 || counts["b"] != 10 {
		t.Fatalf("weights 3:1 over 40 requests gave %v", counts)
	}
	if code, _, which := get(t, base+"/broken", nil); code != http.StatusInternalServerError || which != "gone" {
		t.Fatalf("an unresolved backend: %d %q", code, which)
	}
	if code, _, _ := get(t, base+"/zero", nil); code != http.StatusInternalServerError {
		t.Fatalf("a rule whose weights are all 0: %d", code)
	}

	// A new table replaces the rules at once; a port it drops is closed.
	port2 := ports[1]
	if err := p.Update(&Table{Ports: []Port{{Port: port2, Rules: []Rule{{Match: Match{PathType: PathPrefix, Path: "/"}, Backends: []Backend{{Name: "b", Addr: b, Weight: 1}}}}}}}); err != nil {
		t.Fatal(err)
	}
	if code, body, _ := get(t, fmt.Sprintf("http://127.0.0.1:%d/any", port2), nil); code != 200 || !strings.HasPrefix(body, "b /any") {
		t.Fatalf("the new port: %d %q", code, body)
	}
}

func TestHostnames(t *testing.T) {
	for _, c := range []struct {
		names []string
		host  string
		want  bool
	}{
		{nil, "x", true},
		{[]string{"a.example.com"}, "A.example.com", true},
		{[]string{"*.example.com"}, "a.b.example.com", true},
		{[]string{"*.example.com"}, "example.com", false},
		{[]string{"a.example.com"}, "b.example.com", false},
	} {
		if got := hostMatches(c.names, c.host); got != c.want {
			t.Errorf("hostMatches(%v, %q) = %v", c.names, c.host, got)
		}
	}
}
