package node

import (
	"context"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// freePort is a port free now, for a server the test starts later. It is taken below the kernel's
// ephemeral range (ip_local_port_range, 32768 and up by default): a port that "127.0.0.1:0" handed out
// and the test let go is soon reused as the source port of some outgoing connection (other packages'
// tests run alongside), and then the server cannot bind it.
func freePort(t *testing.T) int {
	t.Helper()
	low := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil && n > 11000 {
				low = n
			}
		}
	}
	for range 1000 {
		port := 10000 + rand.IntN(low-10000)
		if l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port))); err == nil {
			l.Close()
			return port
		}
	}
	t.Fatalf("no free port below %d", low)
	return 0
}

func get(url string) (int, string) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// The head starts Serve's proxy with the first deploy (no port held before), and a worker's proxy
// follows once the head's answers, passing requests on to it.
func TestServeProxiesStartWithTheFirstDeploy(t *testing.T) {
	headPort, workerPort := freePort(t), freePort(t)
	h := testHead(t, HeadConfig{ServePort: headPort})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w, err := StartWorker(ctx, WorkerConfig{GCSAddress: h.GCSAddress(), BindHost: "127.0.0.1", NodeIP: "127.0.0.1",
		HeartbeatPeriod: 50 * time.Millisecond, ServePort: workerPort, HeadServePort: headPort})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	if h.ServeURL() != "" {
		t.Fatalf("the head runs a Serve proxy before any deploy: %s", h.ServeURL())
	}
	if l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(headPort))); err != nil {
		t.Fatalf("port %d is held before any deploy: %v", headPort, err)
	} else {
		l.Close()
	}
	req, _ := http.NewRequest(http.MethodPut, h.DashboardURL()+"/api/serve/applications/",
		strings.NewReader(`{"applications":[{"name":"app","route_prefix":"/app","import_path":"m.app"}]}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("PUT: %v %v", resp, err)
	}
	resp.Body.Close()
	want := "raysim serve: app=app route=/app path=/app/x\n"
	for name, base := range map[string]string{"head": "http://127.0.0.1:" + strconv.Itoa(headPort), "worker": "http://127.0.0.1:" + strconv.Itoa(workerPort)} {
		waitFor(t, 10*time.Second, name+"'s proxy answering", func() bool {
			code, body := get(base + "/app/x")
			return code == http.StatusOK && body == want
		})
	}
}
