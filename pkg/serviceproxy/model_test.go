package serviceproxy

import (
	"net"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func slice(svc string, port int32, portName string, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "ns", Name: svc + "-x", Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To(portName), Port: ptr.To(port), Protocol: ptr.To(corev1.ProtocolTCP)}},
		Endpoints:   eps,
	}
}

func ep(ip string, ready bool) discoveryv1.Endpoint {
	return discoveryv1.Endpoint{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(ready)}}
}

// A Service's ports take their endpoints from its own slices (the port the endpoints controller resolved
// from a targetPort name), ready ones only; headless and ExternalName Services have no ClusterIP ports.
func TestPorts(t *testing.T) {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"},
		Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.9", Type: corev1.ServiceTypeNodePort, SessionAffinity: corev1.ServiceAffinityClientIP,
			Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
	}
	slices := []*discoveryv1.EndpointSlice{
		slice("web", 8265, "http", ep("10.244.0.7", true), ep("10.244.0.5", true), ep("10.244.0.6", false)),
		slice("other", 9999, "http", ep("10.244.0.8", true)),
	}
	got := Ports(svc, slices)
	if len(got) != 1 {
		t.Fatalf("ports: %+v", got)
	}
	p := got[0]
	if !p.IP.Equal(net.IPv4(10, 96, 0, 9)) || p.Port != 80 || p.Protocol != corev1.ProtocolTCP || p.Affinity != DefaultAffinityTimeout {
		t.Errorf("port: %+v", p)
	}
	if len(p.Endpoints) != 2 || p.Endpoints[0].IP.String() != "10.244.0.5" || p.Endpoints[1].IP.String() != "10.244.0.7" || p.Endpoints[0].Port != 8265 {
		t.Errorf("endpoints: %+v, want 10.244.0.5:8265 and 10.244.0.7:8265", p.Endpoints)
	}
	svc.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](60)}}
	if a := Ports(svc, slices)[0].Affinity; a != time.Minute {
		t.Errorf("affinity with timeoutSeconds 60: %v", a)
	}
	for _, s := range []corev1.ServiceSpec{
		{ClusterIP: corev1.ClusterIPNone, Ports: svc.Spec.Ports},
		{Type: corev1.ServiceTypeExternalName, ExternalName: "example.com"},
	} {
		h := &corev1.Service{ObjectMeta: svc.ObjectMeta, Spec: s}
		if Proxied(h) || len(Ports(h, slices)) != 0 {
			t.Errorf("%+v is proxied", s)
		}
	}
}
