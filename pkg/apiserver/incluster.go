package apiserver

import (
	"context"
	"fmt"
	"math/big"
	"net"
	"reflect"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
)

// The `kubernetes` Service in `default`, through which in-cluster clients find the API server.
const (
	KubernetesService = "kubernetes"
	// KubernetesServicePort is the Service's port, and the port of the listener pods reach.
	KubernetesServicePort = 443
)

// republishEvery is how often the kubernetes Service, Endpoints and EndpointSlice are checked and put
// back as they should be, as kube-apiserver's endpoint reconciler does.
const republishEvery = 10 * time.Second

// ServePods serves the API on ln too, with the same TLS, authentication and authorization: the listener
// pods reach (on the pod bridge's address).
func (s *Server) ServePods(ln net.Listener) { s.listeners.add(ln) }

// PublishEndpoint keeps default/kubernetes (a Service with the first ClusterIP of the service range, port
// 443 "https") and its Endpoints and EndpointSlice pointing at host:port, where pods reach the API
// server, until ctx ends.
func (s *Server) PublishEndpoint(ctx context.Context, host net.IP, port int) {
	client, err := kubernetes.NewForConfig(s.LoopbackConfig)
	if err != nil {
		klog.ErrorS(err, "publishing the kubernetes service")
		return
	}
	p := &publisher{client: client, clusterIP: s.kubernetesClusterIP, host: host, port: int32(port)}
	go func() {
		for {
			if err := p.publish(ctx); err != nil && ctx.Err() == nil {
				klog.ErrorS(err, "publishing the kubernetes service")
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(republishEvery):
			}
		}
	}()
}

// KubernetesServiceIP is the kubernetes Service's ClusterIP: the first address of the service range
// (10.96.0.1 of DefaultServiceCIDR when serviceCIDR is nil).
func KubernetesServiceIP(serviceCIDR *net.IPNet) net.IP {
	if serviceCIDR == nil {
		_, serviceCIDR, _ = net.ParseCIDR(DefaultServiceCIDR)
	}
	return firstIP(serviceCIDR)
}

// firstIP is the first address of a range.
func firstIP(cidr *net.IPNet) net.IP {
	n := new(big.Int).SetBytes(cidr.IP.Mask(cidr.Mask))
	b := n.Add(n, big.NewInt(1)).Bytes()
	ip := make(net.IP, len(cidr.IP.Mask(cidr.Mask)))
	copy(ip[len(ip)-len(b):], b)
	return ip
}

type publisher struct {
	client    kubernetes.Interface
	clusterIP net.IP
	host      net.IP
	port      int32
}

var apiServerLabels = map[string]string{"component": "apiserver", "provider": "kubernetes"}

func (p *publisher) publish(ctx context.Context) error {
	ns := metav1.NamespaceDefault
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: KubernetesService, Labels: apiServerLabels},
		Spec: corev1.ServiceSpec{
			Type:            corev1.ServiceTypeClusterIP,
			ClusterIP:       p.clusterIP.String(),
			SessionAffinity: corev1.ServiceAffinityNone,
			Ports: []corev1.ServicePort{{Name: "https", Protocol: corev1.ProtocolTCP, Port: KubernetesServicePort,
				TargetPort: intstr.FromInt32(p.port)}},
		},
	}
	services := p.client.CoreV1().Services(ns)
	old, err := services.Get(ctx, svc.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		if _, err := services.Create(ctx, svc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating the kubernetes service: %w", err)
		}
	case err != nil:
		return err
	case !reflect.DeepEqual(old.Spec.Ports, svc.Spec.Ports) || !reflect.DeepEqual(old.Labels, svc.Labels):
		// The ClusterIP cannot change; ports and labels go back to what they must be.
		old.Spec.Ports, old.Labels = svc.Spec.Ports, svc.Labels
		if _, err := services.Update(ctx, old, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("updating the kubernetes service: %w", err)
		}
	}

	port := corev1.EndpointPort{Name: "https", Port: p.port, Protocol: corev1.ProtocolTCP}
	ep := &corev1.Endpoints{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: KubernetesService, Labels: map[string]string{discoveryv1.LabelSkipMirror: "true"}},
		Subsets:    []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: p.host.String()}}, Ports: []corev1.EndpointPort{port}}},
	}
	if err := ensure(ctx, p.client.CoreV1().Endpoints(ns), ep, func(old *corev1.Endpoints) bool {
		return reflect.DeepEqual(old.Subsets, ep.Subsets) && reflect.DeepEqual(old.Labels, ep.Labels)
	}); err != nil {
		return fmt.Errorf("the kubernetes endpoints: %w", err)
	}

	ready, name, proto := true, "https", corev1.ProtocolTCP
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: KubernetesService, Labels: map[string]string{discoveryv1.LabelServiceName: KubernetesService}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{p.host.String()}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
		Ports:       []discoveryv1.EndpointPort{{Name: &name, Port: &p.port, Protocol: &proto}},
	}
	if err := ensure(ctx, p.client.DiscoveryV1().EndpointSlices(ns), slice, func(old *discoveryv1.EndpointSlice) bool {
		return reflect.DeepEqual(old.Endpoints, slice.Endpoints) && reflect.DeepEqual(old.Ports, slice.Ports) && reflect.DeepEqual(old.Labels, slice.Labels)
	}); err != nil {
		return fmt.Errorf("the kubernetes endpointslice: %w", err)
	}
	return nil
}

// typedClient is what ensure needs of a typed client.
type typedClient[T metav1.Object] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error)
	Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error)
}

// ensure creates want, or replaces the stored object with it unless same says it already matches.
func ensure[T metav1.Object](ctx context.Context, c typedClient[T], want T, same func(T) bool) error {
	old, err := c.Get(ctx, want.GetName(), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = c.Create(ctx, want, metav1.CreateOptions{})
		return err
	case err != nil:
		return err
	case same(old):
		return nil
	}
	want.SetResourceVersion(old.GetResourceVersion())
	_, err = c.Update(ctx, want, metav1.UpdateOptions{})
	return err
}

// apiObjects reads what ServiceAccount tokens are bound to through the API server's loopback client:
// a read of the store, so a ServiceAccount deleted a moment ago is gone at once.
type apiObjects struct{ client kubernetes.Interface }

func (o apiObjects) ServiceAccount(ctx context.Context, namespace, name string) (*corev1.ServiceAccount, error) {
	return o.client.CoreV1().ServiceAccounts(namespace).Get(ctx, name, metav1.GetOptions{})
}

func (o apiObjects) Pod(ctx context.Context, namespace, name string) (*corev1.Pod, error) {
	return o.client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
}
