package dns_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/rayctl/rayctl/pkg/controllers/kube/endpoints"
	rdns "github.com/rayctl/rayctl/pkg/dns"
	"github.com/rayctl/rayctl/test/e2e/framework"
)

const ns = "dns-test"

// fakeUpstream serves example.com. A 192.0.2.7 on 127.0.0.1 (UDP and TCP on one port) and NXDOMAIN otherwise.
func fakeUpstream(t *testing.T) string {
	t.Helper()
	h := dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		if strings.EqualFold(r.Question[0].Name, "example.com.") && r.Question[0].Qtype == dns.TypeA {
			rr, _ := dns.NewRR("example.com. 60 IN A 192.0.2.7")
			m.Answer = []dns.RR{rr}
		} else {
			m.Rcode = dns.RcodeNameError
		}
		_ = w.WriteMsg(m)
	})
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", pc.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []*dns.Server{{PacketConn: pc, Handler: h}, {Listener: l, Handler: h}} {
		go func() { _ = s.ActivateAndServe() }()
		t.Cleanup(func() { _ = s.Shutdown() })
	}
	return pc.LocalAddr().String()
}

type env struct {
	ctx    context.Context
	client kubernetes.Interface
	addr   string
}

// setup starts rayctl up, the endpoints controller and a DNS server forwarding to a fake upstream.
func setup(t *testing.T) *env { t.Helper(); return setupWith(t, false) }

// setupWith is setup with the server's ClusterIPs option set as given.
func setupWith(t *testing.T, clusterIPs bool) *env {
	t.Helper()
	in := framework.StartTest(t, framework.ControlPlaneOnly()...)
	ctrl.SetLogger(logr.Discard())
	// Each component runs as the identity `rayctl up` gives it, so the test also proves RBAC lets it work.
	srv, err := rdns.New(rdns.Options{Listen: []string{"127.0.0.1:0"}, Upstreams: []string{fakeUpstream(t)},
		RESTConfig: in.Identity(t, "rayctl:dns"), ClusterIPs: clusterIPs})
	if err != nil {
		t.Fatal(err)
	}
	controllerCfg := in.Identity(t, "system:kube-controller-manager")
	ctx := framework.RunDuringTest(t, func(ctx context.Context) error { return endpoints.Run(ctx, controllerCfg) }, srv.Run)
	if _, err := in.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e := &env{ctx: ctx, client: in.Client, addr: srv.Addr()}
	// The zone answers SERVFAIL until the server's caches are filled (it cannot list, say, without RBAC).
	e.expect(t, "dns-version.cluster.local", dns.TypeTXT, `NOERROR TXT "1.1.0"`)
	return e
}

func (e *env) service(t *testing.T, svc *corev1.Service) {
	t.Helper()
	svc.Namespace = ns
	if _, err := e.client.CoreV1().Services(ns).Create(e.ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// pod creates a pod on a node no kubelet serves and, playing the kubelet, gives it ip and readiness.
func (e *env) pod(t *testing.T, name string, labels map[string]string, hostname, subdomain, ip string, ready bool) {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec: corev1.PodSpec{NodeName: "nowhere", Hostname: hostname, Subdomain: subdomain,
			Containers: []corev1.Container{{Name: "main", Image: "busybox", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}}}},
	}
	if _, err := e.client.CoreV1().Pods(ns).Create(e.ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.setReady(t, name, ip, ready)
}

func (e *env) setReady(t *testing.T, name, ip string, ready bool) {
	t.Helper()
	framework.SetPodRunning(t, e.ctx, e.client, ns, name, ip, ready)
}

func (e *env) query(t *testing.T, network, name string, qtype uint16) *dns.Msg {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), qtype)
	c := &dns.Client{Net: network, Timeout: 5 * time.Second}
	r, _, err := c.Exchange(m, e.addr)
	if err != nil {
		t.Fatalf("%s %s: %v", dns.TypeToString[qtype], name, err)
	}
	return r
}

// answer renders a response as "RCODE rr rr ..." with the records' data sorted, e.g.
// "NOERROR A 10.244.0.1 A 10.244.0.2".
func answer(r *dns.Msg) string {
	var rrs []string
	for _, rr := range r.Answer {
		h := rr.Header()
		rrs = append(rrs, dns.TypeToString[h.Rrtype]+" "+strings.TrimPrefix(rr.String(), h.String()))
	}
	sort.Strings(rrs)
	return strings.TrimSpace(dns.RcodeToString[r.Rcode] + " " + strings.Join(rrs, " "))
}

// expect polls until the answer to name/qtype is want.
func (e *env) expect(t *testing.T, name string, qtype uint16, want string) *dns.Msg {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := e.query(t, "udp", name, qtype)
		got := answer(r)
		if got == want {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s %s = %q, want %q", dns.TypeToString[qtype], name, got, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestClusterDNS(t *testing.T) {
	e := setup(t)
	web := map[string]string{"app": "web"}
	e.service(t, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: corev1.ServiceSpec{
		Selector: web, Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}}}})
	e.pod(t, "web-1", web, "", "", "10.244.5.1", true)
	e.pod(t, "web-2", web, "", "", "10.244.5.2", false)

	db := map[string]string{"app": "db"}
	e.service(t, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "db"}, Spec: corev1.ServiceSpec{
		ClusterIP: corev1.ClusterIPNone, Selector: db}})
	e.service(t, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "db-all"}, Spec: corev1.ServiceSpec{
		ClusterIP: corev1.ClusterIPNone, Selector: db, PublishNotReadyAddresses: true}})
	e.pod(t, "db-0", db, "db-0", "db", "10.244.6.1", true)
	e.pod(t, "db-1", db, "db-1", "db", "10.244.6.2", false)

	const zone = ".dns-test.svc.cluster.local"

	t.Run("service name gives the ready pod IPs, not the ClusterIP", func(t *testing.T) {
		e.expect(t, "web"+zone, dns.TypeA, "NOERROR A 10.244.5.1")
		r := e.query(t, "udp", "web"+zone, dns.TypeA)
		if !r.Authoritative || r.Answer[0].Header().Ttl != 5 {
			t.Errorf("authoritative %v ttl %d, want true and 5", r.Authoritative, r.Answer[0].Header().Ttl)
		}
		// Over TCP too.
		if got := answer(e.query(t, "tcp", "web"+zone, dns.TypeA)); got != "NOERROR A 10.244.5.1" {
			t.Errorf("over TCP: %q", got)
		}
		// The name exists but has no IPv6 address: NOERROR, nothing.
		e.expect(t, "web"+zone, dns.TypeAAAA, "NOERROR")
	})

	t.Run("SRV gives each ready endpoint with its target port", func(t *testing.T) {
		r := e.expect(t, "_http._tcp.web"+zone, dns.TypeSRV, "NOERROR SRV 0 100 8080 10-244-5-1.web"+zone+".")
		if len(r.Extra) != 1 || !strings.Contains(r.Extra[0].String(), "10.244.5.1") {
			t.Errorf("SRV extra = %v, want the target's A record", r.Extra)
		}
		e.expect(t, "10-244-5-1.web"+zone, dns.TypeA, "NOERROR A 10.244.5.1")
		e.expect(t, "_nope._tcp.web"+zone, dns.TypeSRV, "NXDOMAIN")
	})

	t.Run("headless service and pod hostnames", func(t *testing.T) {
		e.expect(t, "db"+zone, dns.TypeA, "NOERROR A 10.244.6.1")
		e.expect(t, "db-0.db"+zone, dns.TypeA, "NOERROR A 10.244.6.1")
		e.expect(t, "db-1.db"+zone, dns.TypeA, "NXDOMAIN") // not ready
		// publishNotReadyAddresses publishes both, hostnames only under the pods' own subdomain.
		e.expect(t, "db-all"+zone, dns.TypeA, "NOERROR A 10.244.6.1 A 10.244.6.2")
		e.expect(t, "10-244-6-2.db-all"+zone, dns.TypeA, "NOERROR A 10.244.6.2")
	})

	t.Run("pod records", func(t *testing.T) {
		e.expect(t, "10-244-5-2.dns-test.pod.cluster.local", dns.TypeA, "NOERROR A 10.244.5.2")
		e.expect(t, "10-9-9-9.dns-test.pod.cluster.local", dns.TypeA, "NXDOMAIN")
	})

	t.Run("reverse lookup of an endpoint", func(t *testing.T) {
		e.expect(t, "1.6.244.10.in-addr.arpa", dns.TypePTR, "NOERROR PTR db-0.db"+zone+".")
	})

	t.Run("unknown names in the zone are NXDOMAIN", func(t *testing.T) {
		r := e.expect(t, "nope"+zone, dns.TypeA, "NXDOMAIN")
		if len(r.Ns) != 1 || r.Ns[0].Header().Rrtype != dns.TypeSOA {
			t.Errorf("NXDOMAIN authority = %v, want the zone's SOA", r.Ns)
		}
		e.expect(t, "web.other-ns.svc.cluster.local", dns.TypeA, "NXDOMAIN")
		e.expect(t, "whatever.cluster.local", dns.TypeA, "NXDOMAIN")
		e.expect(t, "dns-version.cluster.local", dns.TypeTXT, `NOERROR TXT "1.1.0"`)
	})

	t.Run("other names go upstream", func(t *testing.T) {
		e.expect(t, "example.com", dns.TypeA, "NOERROR A 192.0.2.7")
		if got := answer(e.query(t, "tcp", "example.com", dns.TypeA)); got != "NOERROR A 192.0.2.7" {
			t.Errorf("over TCP: %q", got)
		}
		e.expect(t, "unknown.example.org", dns.TypeA, "NXDOMAIN")
	})

	t.Run("a pod becoming ready appears", func(t *testing.T) {
		e.setReady(t, "web-2", "10.244.5.2", true)
		e.expect(t, "web"+zone, dns.TypeA, "NOERROR A 10.244.5.1 A 10.244.5.2")
		e.setReady(t, "web-1", "10.244.5.1", false)
		e.expect(t, "web"+zone, dns.TypeA, "NOERROR A 10.244.5.2")
	})

	t.Run("a service with no ready endpoint exists but has no address", func(t *testing.T) {
		e.service(t, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "empty"}, Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "none"}, Ports: []corev1.ServicePort{{Port: 80}}}})
		e.expect(t, "empty"+zone, dns.TypeA, "NOERROR")
	})

	t.Run("ExternalName is a CNAME", func(t *testing.T) {
		e.service(t, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "ext"}, Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeExternalName, ExternalName: "example.com"}})
		e.expect(t, "ext"+zone, dns.TypeA, "NOERROR A 192.0.2.7 CNAME example.com.")
	})
}

// Where a Service proxy runs, a Service with a ClusterIP resolves to it, and its SRV records name the Service
// and its port; headless Services answer as before.
func TestClusterIPAnswers(t *testing.T) {
	e := setupWith(t, true)
	web := map[string]string{"app": "web"}
	e.service(t, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: corev1.ServiceSpec{
		Selector: web, Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}}}})
	e.pod(t, "web-1", web, "", "", "10.244.5.1", true)
	db := map[string]string{"app": "db"}
	e.service(t, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "db"}, Spec: corev1.ServiceSpec{
		ClusterIP: corev1.ClusterIPNone, Selector: db, Ports: []corev1.ServicePort{{Name: "pg", Port: 5432}}}})
	e.pod(t, "db-0", db, "db-0", "db", "10.244.6.1", true)
	svc, err := e.client.CoreV1().Services(ns).Get(e.ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const zone = ".dns-test.svc.cluster.local"
	e.expect(t, "web"+zone, dns.TypeA, "NOERROR A "+svc.Spec.ClusterIP)
	r := e.expect(t, "_http._tcp.web"+zone, dns.TypeSRV, "NOERROR SRV 0 100 80 web"+zone+".")
	if len(r.Extra) != 1 || !strings.Contains(r.Extra[0].String(), svc.Spec.ClusterIP) {
		t.Errorf("SRV extra = %v, want the ClusterIP", r.Extra)
	}
	e.expect(t, "_nope._tcp.web"+zone, dns.TypeSRV, "NXDOMAIN")
	e.expect(t, "10-244-5-1.web"+zone, dns.TypeA, "NXDOMAIN") // no endpoint names behind a ClusterIP
	// Headless: the ready endpoints, their host names and SRV records with the endpoints' ports.
	e.expect(t, "db"+zone, dns.TypeA, "NOERROR A 10.244.6.1")
	e.expect(t, "db-0.db"+zone, dns.TypeA, "NOERROR A 10.244.6.1")
	e.expect(t, "_pg._tcp.db"+zone, dns.TypeSRV, "NOERROR SRV 0 100 5432 db-0.db"+zone+".")
}

func TestUpstreamUnreachableIsServfail(t *testing.T) {
	// A UDP socket that never answers.
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	srv, err := rdns.New(rdns.Options{Listen: []string{"127.0.0.1:0"}, Upstreams: []string{pc.LocalAddr().String()},
		ForwardTimeout: 200 * time.Millisecond, RESTConfig: &rest.Config{Host: "https://127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go srv.Run(ctx)
	m := new(dns.Msg)
	m.SetQuestion("example.com.", dns.TypeA)
	r, _, err := (&dns.Client{Timeout: 5 * time.Second}).Exchange(m, srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	if r.Rcode != dns.RcodeServerFailure {
		t.Errorf("rcode %s, want SERVFAIL", dns.RcodeToString[r.Rcode])
	}
	// The cluster zone cannot be answered before the API server is reached: SERVFAIL, so clients retry.
	m.SetQuestion("web.default.svc.cluster.local.", dns.TypeA)
	if r, _, err = (&dns.Client{Timeout: 5 * time.Second}).Exchange(m, srv.Addr()); err != nil || r.Rcode != dns.RcodeServerFailure {
		t.Errorf("zone query before sync: %v %v, want SERVFAIL", r, err)
	}
}

func TestUpstreamsFromResolvConf(t *testing.T) {
	conf := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(conf, []byte("search example.org\nnameserver 192.0.2.53\nnameserver 192.0.2.54\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := &rest.Config{Host: "https://127.0.0.1:1"}
	srv, err := rdns.New(rdns.Options{Listen: []string{"127.0.0.1:0"}, ResolvConf: conf, RESTConfig: cfg})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if got := fmt.Sprint(srv.Upstreams()); got != "[192.0.2.53:53 192.0.2.54:53]" {
		t.Errorf("upstreams %s", got)
	}
	// A busy address is an error, not a silent second server.
	if srv2, err := rdns.New(rdns.Options{Listen: []string{srv.Addr()}, Upstreams: []string{}, RESTConfig: cfg}); err == nil {
		srv2.Close()
		t.Errorf("listening twice on %s succeeded", srv.Addr())
	}
}

func TestFreeBindListensBeforeTheAddressExists(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("IP_FREEBIND is Linux only")
	}
	// 192.0.2.0/24 is TEST-NET-1: no interface here has it, as the bridge gateway before the bridge exists.
	cfg := &rest.Config{Host: "https://127.0.0.1:1"}
	if _, err := rdns.New(rdns.Options{Listen: []string{"192.0.2.1:0"}, RESTConfig: cfg}); err == nil {
		t.Skip("192.0.2.1 is assigned on this machine")
	}
	srv, err := rdns.New(rdns.Options{Listen: []string{"192.0.2.1:0"}, FreeBind: true, RESTConfig: cfg})
	if err != nil {
		t.Fatal(err)
	}
	srv.Close()
}
