// Package service is the registry of core/v1 services: the store, its status subresource, and the
// allocation of ClusterIPs from the service range.
package service

import (
	"context"
	"net"
	"net/url"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/conversion"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/generic"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/rayctl/rayctl/pkg/apiserver/registry"
	"github.com/rayctl/rayctl/pkg/apiserver/registry/proxyrest"
	"github.com/rayctl/rayctl/pkg/apiserver/validation"
)

// Resource describes services to the shared store.
var Resource = &registry.Resource{
	Resource:             corev1.Resource("services"),
	Singular:             "service",
	Version:              "v1",
	Kind:                 "Service",
	New:                  func() runtime.Object { return &corev1.Service{} },
	NewList:              func() runtime.Object { return &corev1.ServiceList{} },
	Namespaced:           true,
	HasStatus:            true,
	PrepareForUpdate:     prepareForUpdate,
	Validate:             registry.Validator(validation.ValidateService),
	ValidateUpdate:       registry.UpdateValidator(validation.ValidateServiceUpdate),
	ValidateStatusUpdate: registry.UpdateValidator(validation.ValidateServiceStatusUpdate),
	SelectableFields: map[string]func(runtime.Object) string{
		"spec.clusterIP": func(o runtime.Object) string { return o.(*corev1.Service).Spec.ClusterIP },
		"spec.type":      func(o runtime.Object) string { return string(o.(*corev1.Service).Spec.Type) },
	},
	ShortNames: []string{"svc"},
	Categories: []string{"all"},
}

// NewStorage returns the services endpoints: services, services/status and services/proxy, which reaches
// the endpoints the EndpointSlices in slices list. ClusterIPs come from cidr.
func NewStorage(scheme *runtime.Scheme, optsGetter generic.RESTOptionsGetter, cidr *net.IPNet, slices rest.Lister, podDial proxyrest.DialFunc) (registry.Storage, error) {
	if err := scheme.AddConversionFunc((*url.Values)(nil), (*corev1.ServiceProxyOptions)(nil), func(a, b any, _ conversion.Scope) error {
		if p := (*a.(*url.Values))["path"]; len(p) > 0 {
			b.(*corev1.ServiceProxyOptions).Path = p[0]
		}
		return nil
	}); err != nil {
		return nil, err
	}
	storage, main, err := registry.Build(scheme, Resource, optsGetter)
	if err != nil {
		return nil, err
	}
	alloc := newAllocator(cidr, func(ctx context.Context) ([]string, error) { return listClusterIPs(ctx, main.Store) })
	main.BeginCreate = alloc.beginCreate
	main.AfterDelete = alloc.afterDelete
	storage["services/proxy"] = NewProxyREST(main.Store, slices, podDial)
	return storage, nil
}

// listClusterIPs reads every service's ClusterIPs from storage.
func listClusterIPs(ctx context.Context, store *genericregistry.Store) ([]string, error) {
	list := &corev1.ServiceList{}
	if err := store.Storage.GetList(ctx, store.KeyRootFunc(ctx), storageListAll(), list); err != nil {
		return nil, err
	}
	var ips []string
	for _, svc := range list.Items {
		ips = append(ips, svc.Spec.ClusterIPs...)
		if len(svc.Spec.ClusterIPs) == 0 && svc.Spec.ClusterIP != "" {
			ips = append(ips, svc.Spec.ClusterIP)
		}
	}
	return ips, nil
}
