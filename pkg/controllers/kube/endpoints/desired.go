package endpoints

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/kubectl/pkg/util/podutils"
	"k8s.io/utils/ptr"
)

// maxSliceEndpoints is how many endpoints one EndpointSlice holds, kube-controller-manager's default.
const maxSliceEndpoints = 100

// headlessLabel marks Endpoints and slices of headless Services, as on a real cluster (kube-proxy skips them).
const headlessLabel = "service.kubernetes.io/headless"

func isHeadless(svc *corev1.Service) bool { return svc.Spec.ClusterIP == corev1.ClusterIPNone }

// podIPv4 returns the pod's IPv4 address, or "" when it has none yet.
func podIPv4(pod *corev1.Pod) string {
	ips := []string{pod.Status.PodIP}
	for _, p := range pod.Status.PodIPs {
		ips = append(ips, p.IP)
	}
	for _, s := range ips {
		if ip := net.ParseIP(s); ip != nil && ip.To4() != nil {
			return s
		}
	}
	return ""
}

// finished reports whether the pod's containers are done for good, which takes it out of every endpoint list.
func finished(pod *corev1.Pod) bool {
	switch pod.Spec.RestartPolicy {
	case corev1.RestartPolicyNever:
		return pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded
	case corev1.RestartPolicyOnFailure:
		return pod.Status.Phase == corev1.PodSucceeded
	}
	return false
}

// findPort resolves a Service port's targetPort against one pod: a number stands for itself, a name is looked
// up among the pod's container ports (sidecar init containers included) with the same protocol.
func findPort(pod *corev1.Pod, sp *corev1.ServicePort) (int32, bool) {
	switch sp.TargetPort.Type {
	case intstr.Int:
		if sp.TargetPort.IntVal == 0 {
			return sp.Port, true
		}
		return sp.TargetPort.IntVal, true
	case intstr.String:
		name := sp.TargetPort.StrVal
		if name == "" {
			return sp.Port, true
		}
		proto := sp.Protocol
		if proto == "" {
			proto = corev1.ProtocolTCP
		}
		containers := pod.Spec.Containers
		for _, c := range pod.Spec.InitContainers {
			if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
				containers = append(containers[:len(containers):len(containers)], c)
			}
		}
		for _, c := range containers {
			for _, p := range c.Ports {
				pp := p.Protocol
				if pp == "" {
					pp = corev1.ProtocolTCP
				}
				if p.Name == name && pp == proto {
					return p.ContainerPort, true
				}
			}
		}
	}
	return 0, false
}

func targetRef(pod *corev1.Pod) *corev1.ObjectReference {
	return &corev1.ObjectReference{Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID}
}

// hostname is the pod's hostname when its subdomain names the Service, which is what gives it a DNS name
// under the Service.
func hostname(pod *corev1.Pod, svc *corev1.Service) string {
	if pod.Spec.Hostname != "" && pod.Spec.Subdomain == svc.Name && pod.Namespace == svc.Namespace {
		return pod.Spec.Hostname
	}
	return ""
}

// desiredSubsets computes an Endpoints object's subsets for svc from the pods its selector matches.
func desiredSubsets(svc *corev1.Service, pods []*corev1.Pod) []corev1.EndpointSubset {
	type entry struct {
		addr  corev1.EndpointAddress
		ready bool
		ports []corev1.EndpointPort
	}
	var entries []entry
	tolerate := svc.Spec.PublishNotReadyAddresses
	for _, pod := range pods {
		ip := podIPv4(pod)
		if ip == "" || finished(pod) || (pod.DeletionTimestamp != nil && !tolerate) {
			continue
		}
		e := entry{addr: corev1.EndpointAddress{IP: ip, Hostname: hostname(pod, svc), TargetRef: targetRef(pod)},
			ready: tolerate || podutils.IsPodReady(pod)}
		if pod.Spec.NodeName != "" {
			e.addr.NodeName = ptr.To(pod.Spec.NodeName)
		}
		if len(svc.Spec.Ports) == 0 {
			if isHeadless(svc) {
				entries = append(entries, e)
			}
			continue
		}
		for i := range svc.Spec.Ports {
			sp := &svc.Spec.Ports[i]
			n, ok := findPort(pod, sp)
			if !ok {
				continue
			}
			e.ports = append(e.ports, corev1.EndpointPort{Name: sp.Name, Port: n, Protocol: protocol(sp), AppProtocol: sp.AppProtocol})
		}
		if len(e.ports) > 0 {
			sortEndpointPorts(e.ports)
			entries = append(entries, e)
		}
	}
	// One subset per distinct port set, addresses and subsets in a stable order.
	byPorts := map[string]*corev1.EndpointSubset{}
	var keys []string
	for _, e := range entries {
		k := endpointPortsKey(e.ports)
		s, ok := byPorts[k]
		if !ok {
			s = &corev1.EndpointSubset{Ports: e.ports}
			byPorts[k] = s
			keys = append(keys, k)
		}
		if e.ready {
			s.Addresses = append(s.Addresses, e.addr)
		} else {
			s.NotReadyAddresses = append(s.NotReadyAddresses, e.addr)
		}
	}
	sort.Strings(keys)
	var out []corev1.EndpointSubset
	for _, k := range keys {
		s := byPorts[k]
		sortAddresses(s.Addresses)
		sortAddresses(s.NotReadyAddresses)
		out = append(out, *s)
	}
	return out
}

func endpointPortsKey(ports []corev1.EndpointPort) string {
	var b strings.Builder
	for _, p := range ports {
		fmt.Fprintf(&b, "%s/%d/%s/%s;", p.Name, p.Port, p.Protocol, ptr.Deref(p.AppProtocol, ""))
	}
	return b.String()
}

func protocol(sp *corev1.ServicePort) corev1.Protocol {
	if sp.Protocol == "" {
		return corev1.ProtocolTCP
	}
	return sp.Protocol
}

func sortEndpointPorts(ps []corev1.EndpointPort) {
	sort.Slice(ps, func(i, j int) bool {
		if ps[i].Name != ps[j].Name {
			return ps[i].Name < ps[j].Name
		}
		return ps[i].Port < ps[j].Port
	})
}

func sortAddresses(as []corev1.EndpointAddress) {
	sort.Slice(as, func(i, j int) bool {
		if as[i].IP != as[j].IP {
			return ipLess(as[i].IP, as[j].IP)
		}
		return refUID(as[i].TargetRef) < refUID(as[j].TargetRef)
	})
}

func refUID(r *corev1.ObjectReference) string {
	if r == nil {
		return ""
	}
	return string(r.UID)
}

func ipLess(a, b string) bool {
	ia, ib := net.ParseIP(a).To16(), net.ParseIP(b).To16()
	if ia == nil || ib == nil {
		return a < b
	}
	return string(ia) < string(ib)
}

// sliceGroup is the endpoints of a Service that share one resolved port set.
type sliceGroup struct {
	ports     []discoveryv1.EndpointPort
	endpoints []discoveryv1.Endpoint
}

// desiredSlices computes the EndpointSlices for svc: names, labels, owner, ports and endpoints.
func desiredSlices(svc *corev1.Service, pods []*corev1.Pod) []*discoveryv1.EndpointSlice {
	groups := map[string]*sliceGroup{}
	for _, pod := range pods {
		ip := podIPv4(pod)
		if ip == "" || finished(pod) {
			continue
		}
		serving := podutils.IsPodReady(pod)
		terminating := pod.DeletionTimestamp != nil
		ep := discoveryv1.Endpoint{
			Addresses: []string{ip},
			Conditions: discoveryv1.EndpointConditions{
				Ready:       ptr.To(svc.Spec.PublishNotReadyAddresses || (serving && !terminating)),
				Serving:     ptr.To(serving),
				Terminating: ptr.To(terminating),
			},
			TargetRef: targetRef(pod),
		}
		if h := hostname(pod, svc); h != "" {
			ep.Hostname = ptr.To(h)
		}
		if pod.Spec.NodeName != "" {
			ep.NodeName = ptr.To(pod.Spec.NodeName)
		}
		ports := []discoveryv1.EndpointPort{}
		for i := range svc.Spec.Ports {
			sp := &svc.Spec.Ports[i]
			n, ok := findPort(pod, sp)
			if !ok {
				continue
			}
			ports = append(ports, discoveryv1.EndpointPort{Name: ptr.To(sp.Name), Port: ptr.To(n),
				Protocol: ptr.To(protocol(sp)), AppProtocol: sp.AppProtocol})
		}
		sort.Slice(ports, func(i, j int) bool {
			if *ports[i].Name != *ports[j].Name {
				return *ports[i].Name < *ports[j].Name
			}
			return *ports[i].Port < *ports[j].Port
		})
		k := slicePortsKey(ports)
		g, ok := groups[k]
		if !ok {
			g = &sliceGroup{ports: ports}
			groups[k] = g
		}
		g.endpoints = append(g.endpoints, ep)
	}
	if len(groups) == 0 {
		// A placeholder says "this Service has no endpoints" rather than "nobody has looked".
		groups[slicePortsKey(nil)] = &sliceGroup{ports: []discoveryv1.EndpointPort{}}
	}
	var out []*discoveryv1.EndpointSlice
	for k, g := range groups {
		sort.Slice(g.endpoints, func(i, j int) bool {
			a, b := g.endpoints[i], g.endpoints[j]
			if a.Addresses[0] != b.Addresses[0] {
				return ipLess(a.Addresses[0], b.Addresses[0])
			}
			return refUID(a.TargetRef) < refUID(b.TargetRef)
		})
		base := sliceName(svc.Name, k)
		for i := 0; i == 0 || i*maxSliceEndpoints < len(g.endpoints); i++ {
			name := base
			if i > 0 {
				name = fmt.Sprintf("%s-%d", base, i)
			}
			end := min((i+1)*maxSliceEndpoints, len(g.endpoints))
			eps := []discoveryv1.Endpoint{}
			if i*maxSliceEndpoints < end {
				eps = g.endpoints[i*maxSliceEndpoints : end]
			}
			out = append(out, &discoveryv1.EndpointSlice{
				ObjectMeta: metav1.ObjectMeta{
					Name: name, Namespace: svc.Namespace,
					Labels:          sliceLabels(svc),
					OwnerReferences: []metav1.OwnerReference{ownerRef(svc)},
				},
				AddressType: discoveryv1.AddressTypeIPv4,
				Endpoints:   eps,
				Ports:       g.ports,
			})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func slicePortsKey(ports []discoveryv1.EndpointPort) string {
	var b strings.Builder
	for _, p := range ports {
		fmt.Fprintf(&b, "%s/%d/%s/%s;", *p.Name, *p.Port, *p.Protocol, ptr.Deref(p.AppProtocol, ""))
	}
	return b.String()
}

// sliceName is stable for a Service and port set, so a create from a stale cache fails with AlreadyExists
// instead of making a duplicate. (A slice that took over one no longer wanted keeps that one's name; an
// update from a stale cache fails with a conflict.)
func sliceName(svc, portsKey string) string {
	sum := sha256.Sum256([]byte(portsKey))
	if len(svc) > 200 {
		svc = svc[:200]
	}
	return svc + "-" + hex.EncodeToString(sum[:])[:8]
}

func ownerRef(svc *corev1.Service) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: "v1", Kind: "Service", Name: svc.Name, UID: svc.UID,
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}
}

// serviceLabels are the Service's own labels plus the headless marker, as on Endpoints.
func serviceLabels(svc *corev1.Service) map[string]string {
	l := map[string]string{}
	for k, v := range svc.Labels {
		l[k] = v
	}
	delete(l, headlessLabel)
	if isHeadless(svc) {
		l[headlessLabel] = ""
	}
	return l
}

func sliceLabels(svc *corev1.Service) map[string]string {
	l := serviceLabels(svc)
	l[discoveryv1.LabelServiceName] = svc.Name
	l[discoveryv1.LabelManagedBy] = ManagedBy
	return l
}
