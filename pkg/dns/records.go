package dns

import (
	"context"
	"net"
	"sort"
	"strings"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

const (
	byService = "service" // EndpointSlices by "<ns>/<service>"
	byIP      = "ip"      // EndpointSlices by endpoint address, Pods by "<ns>/<ip>"
)

// records is the informer-backed view of the cluster the zone's answers come from.
type records struct {
	factory  informers.SharedInformerFactory
	services corelisters.ServiceLister
	slices   cache.Indexer
	pods     cache.Indexer
	synced   []cache.DoneChecker
	ready    atomic.Bool
}

func newRecords(cfg *rest.Config) (*records, error) {
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	f := informers.NewSharedInformerFactory(client, 0)
	r := &records{factory: f, services: f.Core().V1().Services().Lister()}
	svcInf := f.Core().V1().Services().Informer()
	sliceInf := f.Discovery().V1().EndpointSlices().Informer()
	podInf := f.Core().V1().Pods().Informer()
	if err := sliceInf.AddIndexers(cache.Indexers{byService: sliceService, byIP: sliceIPs}); err != nil {
		return nil, err
	}
	if err := podInf.AddIndexers(cache.Indexers{byIP: podIPs}); err != nil {
		return nil, err
	}
	// Only a pod's name and addresses matter here; keep the cache small.
	if err := podInf.SetTransform(slimPod); err != nil {
		return nil, err
	}
	r.slices, r.pods = sliceInf.GetIndexer(), podInf.GetIndexer()
	r.synced = []cache.DoneChecker{svcInf.HasSyncedChecker(), sliceInf.HasSyncedChecker(), podInf.HasSyncedChecker()}
	return r, nil
}

func (r *records) run(ctx context.Context) {
	r.factory.Start(ctx.Done())
	if cache.WaitFor(ctx, "", r.synced...) {
		r.ready.Store(true)
	}
	<-ctx.Done()
	r.factory.Shutdown()
}

func sliceService(obj any) ([]string, error) {
	s := obj.(*discoveryv1.EndpointSlice)
	if name := s.Labels[discoveryv1.LabelServiceName]; name != "" {
		return []string{s.Namespace + "/" + name}, nil
	}
	return nil, nil
}

func sliceIPs(obj any) ([]string, error) {
	s := obj.(*discoveryv1.EndpointSlice)
	var out []string
	for _, ep := range s.Endpoints {
		out = append(out, ep.Addresses...)
	}
	return out, nil
}

func podIPs(obj any) ([]string, error) {
	p := obj.(*corev1.Pod)
	var out []string
	seen := map[string]bool{}
	for _, ip := range append([]corev1.PodIP{{IP: p.Status.PodIP}}, p.Status.PodIPs...) {
		if ip.IP != "" && !seen[ip.IP] {
			seen[ip.IP] = true
			out = append(out, p.Namespace+"/"+ip.IP)
		}
	}
	return out, nil
}

func slimPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, UID: p.UID, ResourceVersion: p.ResourceVersion},
		Status:     corev1.PodStatus{PodIP: p.Status.PodIP, PodIPs: p.Status.PodIPs},
	}, nil
}

// endpoint is one address of a Service as DNS names it.
type endpoint struct {
	ip    string
	name  string // hostname, or the IP with dashes
	named bool   // name is the pod's hostname
}

// servicePort is one port of an EndpointSlice together with the endpoints it applies to.
type servicePort struct {
	name, proto string
	port        int32
	endpoints   []endpoint
}

// serviceEndpoints gathers a Service's IPv4 endpoints (deduplicated, ordered by IP) and, per slice port, the
// endpoints it applies to. Not-ready endpoints are dropped unless the Service publishes them.
func (r *records) serviceEndpoints(svc *corev1.Service) ([]endpoint, []servicePort) {
	objs, _ := r.slices.ByIndex(byService, svc.Namespace+"/"+svc.Name)
	seen := map[string]bool{}
	var all []endpoint
	var ports []servicePort
	for _, o := range objs {
		s := o.(*discoveryv1.EndpointSlice)
		if s.AddressType != discoveryv1.AddressTypeIPv4 {
			continue
		}
		var eps []endpoint
		for _, ep := range s.Endpoints {
			ready := ep.Conditions.Ready == nil || *ep.Conditions.Ready || svc.Spec.PublishNotReadyAddresses
			if !ready || len(ep.Addresses) == 0 || net.ParseIP(ep.Addresses[0]).To4() == nil {
				continue
			}
			e := endpoint{ip: ep.Addresses[0], name: dashed(ep.Addresses[0])}
			if ep.Hostname != nil && *ep.Hostname != "" {
				e.name, e.named = strings.ToLower(*ep.Hostname), true
			}
			eps = append(eps, e)
			if !seen[e.ip] {
				seen[e.ip] = true
				all = append(all, e)
			}
		}
		for _, p := range s.Ports {
			if p.Port == nil {
				continue
			}
			sp := servicePort{port: *p.Port, proto: "tcp", endpoints: eps}
			if p.Name != nil {
				sp.name = strings.ToLower(*p.Name)
			}
			if p.Protocol != nil {
				sp.proto = strings.ToLower(string(*p.Protocol))
			}
			ports = append(ports, sp)
		}
	}
	sort.Slice(all, func(i, j int) bool { return ipLess(all[i].ip, all[j].ip) })
	return all, ports
}

// service returns Service ns/name, or nil.
func (r *records) service(ns, name string) *corev1.Service {
	svc, err := r.services.Services(ns).Get(name)
	if err != nil {
		return nil
	}
	return svc
}

// hasServices reports whether namespace ns has any Service.
func (r *records) hasServices(ns string) bool {
	l, _ := r.services.Services(ns).List(labels.Everything())
	return len(l) > 0
}

// podHasIP reports whether a Pod in ns has the address ip.
func (r *records) podHasIP(ns, ip string) bool {
	objs, _ := r.pods.ByIndex(byIP, ns+"/"+ip)
	return len(objs) > 0
}

// hasPods reports whether namespace ns has any Pod.
func (r *records) hasPods(ns string) bool {
	keys, _ := r.pods.IndexKeys(cache.NamespaceIndex, ns)
	return len(keys) > 0
}

// endpointName returns the DNS name of a ready endpoint with address ip, relative to the zone
// ("<ep>.<svc>.<ns>.svc"), or "". When several Services have the address, a name from a pod hostname wins,
// then the alphabetically first.
func (r *records) endpointName(ip string) string {
	objs, _ := r.slices.ByIndex(byIP, ip)
	var names, hostNames []string
	for _, o := range objs {
		s := o.(*discoveryv1.EndpointSlice)
		svcName := s.Labels[discoveryv1.LabelServiceName]
		svc := r.service(s.Namespace, svcName)
		if svc == nil {
			continue
		}
		eps, _ := r.serviceEndpoints(svc)
		for _, e := range eps {
			if e.ip != ip {
				continue
			}
			n := e.name + "." + svcName + "." + s.Namespace + ".svc"
			if e.named {
				hostNames = append(hostNames, n)
			} else {
				names = append(names, n)
			}
		}
	}
	if len(hostNames) > 0 {
		names = hostNames
	}
	if len(names) == 0 {
		return ""
	}
	sort.Strings(names)
	return names[0]
}

func dashed(ip string) string { return strings.ReplaceAll(ip, ".", "-") }

func ipLess(a, b string) bool {
	ia, ib := net.ParseIP(a).To16(), net.ParseIP(b).To16()
	if ia == nil || ib == nil {
		return a < b
	}
	return string(ia) < string(ib)
}
