package service

import (
	"context"
	"fmt"
	"math/big"
	"net"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/storage"
)

// allocator hands out ClusterIPs from one range. The API server is the only writer of services, so an
// in-memory set, loaded from storage on first use and kept under a lock, is the whole truth.
type allocator struct {
	mu     sync.Mutex
	cidr   *net.IPNet
	base   *big.Int
	size   int64
	used   map[string]bool
	next   int64
	loaded bool
	load   func(ctx context.Context) ([]string, error)
}

func newAllocator(cidr *net.IPNet, load func(ctx context.Context) ([]string, error)) *allocator {
	ones, bits := cidr.Mask.Size()
	size := new(big.Int).Lsh(big.NewInt(1), uint(bits-ones)).Int64()
	return &allocator{cidr: cidr, base: new(big.Int).SetBytes(cidr.IP.To16()), size: size, used: map[string]bool{}, next: 1, load: load}
}

func (a *allocator) ensureLoaded(ctx context.Context) error {
	if a.loaded {
		return nil
	}
	ips, err := a.load(ctx)
	if err != nil {
		return err
	}
	for _, ip := range ips {
		if ip != corev1.ClusterIPNone {
			a.used[ip] = true
		}
	}
	a.loaded = true
	return nil
}

func (a *allocator) ipAt(offset int64) net.IP {
	b := new(big.Int).Add(a.base, big.NewInt(offset)).Bytes()
	ip := make(net.IP, 16)
	copy(ip[16-len(b):], b)
	if v4 := ip.To4(); v4 != nil && a.cidr.IP.To4() != nil {
		return v4
	}
	return ip
}

// allocate reserves a free address: the first one (offset 1, the network address excluded) is kept for
// the `kubernetes` service, as on a real cluster.
func (a *allocator) allocate() (string, error) {
	// Offsets 0 (network) and size-1 (broadcast) are never handed out.
	for i := int64(0); i < a.size-2; i++ {
		off := (a.next-1+i)%(a.size-2) + 1
		ip := a.ipAt(off).String()
		if !a.used[ip] {
			a.used[ip] = true
			a.next = off + 1
			return ip, nil
		}
	}
	return "", fmt.Errorf("no ClusterIPs left in %s", a.cidr)
}

// beginCreate gives a new service its ClusterIP, or reserves the one it asks for; the finish function
// gives the address back if the create fails.
func (a *allocator) beginCreate(ctx context.Context, obj runtime.Object, options *metav1.CreateOptions) (genericregistry.FinishFunc, error) {
	svc := obj.(*corev1.Service)
	if svc.Spec.Type == corev1.ServiceTypeExternalName || svc.Spec.ClusterIP == corev1.ClusterIPNone {
		if svc.Spec.ClusterIP == corev1.ClusterIPNone {
			svc.Spec.ClusterIPs = []string{corev1.ClusterIPNone}
		}
		return func(context.Context, bool) {}, nil
	}
	dryRun := options != nil && len(options.DryRun) > 0
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.ensureLoaded(ctx); err != nil {
		return nil, err
	}
	ip := svc.Spec.ClusterIP
	switch {
	case ip == "":
		var err error
		if ip, err = a.allocate(); err != nil {
			return nil, apierrors.NewInternalError(err)
		}
	default:
		parsed := net.ParseIP(ip)
		if parsed == nil || !a.cidr.Contains(parsed) {
			return nil, apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("Service").GroupKind(), svc.Name, field.ErrorList{
				field.Invalid(field.NewPath("spec", "clusterIPs").Index(0), ip, fmt.Sprintf("failed to allocate IP %s: the provided IP (%s) is not in the valid range. The range of valid IPs is %s", ip, ip, a.cidr)),
			})
		}
		if a.used[parsed.String()] {
			return nil, apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("Service").GroupKind(), svc.Name, field.ErrorList{
				field.Invalid(field.NewPath("spec", "clusterIPs").Index(0), ip, fmt.Sprintf("failed to allocate IP %s: provided IP is already allocated", ip)),
			})
		}
		ip = parsed.String()
		a.used[ip] = true
	}
	if dryRun {
		delete(a.used, ip)
	}
	svc.Spec.ClusterIP = ip
	svc.Spec.ClusterIPs = []string{ip}
	return func(ctx context.Context, success bool) {
		if !success && !dryRun {
			a.release(ip)
		}
	}, nil
}

func (a *allocator) release(ip string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.used, ip)
}

// afterDelete frees a deleted service's addresses.
func (a *allocator) afterDelete(obj runtime.Object, options *metav1.DeleteOptions) {
	if options != nil && len(options.DryRun) > 0 {
		return
	}
	svc := obj.(*corev1.Service)
	for _, ip := range append([]string{svc.Spec.ClusterIP}, svc.Spec.ClusterIPs...) {
		if ip != "" && ip != corev1.ClusterIPNone {
			a.release(ip)
		}
	}
}

func storageListAll() storage.ListOptions {
	return storage.ListOptions{Recursive: true, Predicate: storage.SelectionPredicate{Label: labels.Everything(), Field: fields.Everything()}}
}
