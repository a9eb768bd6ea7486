// Package pod is the registry of core/v1 pods: the store with its status and binding subresources, and
// the log and exec subresources that proxy to the kubelet of the pod's node.
package pod

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/generic"

	"github.com/rayctl/rayctl/pkg/apiserver/registry"
	"github.com/rayctl/rayctl/pkg/apiserver/registry/proxyrest"
	"github.com/rayctl/rayctl/pkg/apiserver/validation"
)

// Resource describes pods to the shared store.
var Resource = &registry.Resource{
	Resource:               corev1.Resource("pods"),
	Singular:               "pod",
	Version:                "v1",
	Kind:                   "Pod",
	New:                    func() runtime.Object { return &corev1.Pod{} },
	NewList:                func() runtime.Object { return &corev1.PodList{} },
	Namespaced:             true,
	HasStatus:              true,
	PrepareForCreate:       prepareForCreate,
	PrepareForStatusUpdate: prepareForStatusUpdate,
	Validate:               registry.Validator(validation.ValidatePod),
	ValidateUpdate:         registry.UpdateValidator(validation.ValidatePodUpdate),
	ValidateStatusUpdate:   registry.UpdateValidator(validation.ValidatePodStatusUpdate),
	GracefulDelete:         checkGracefulDelete,
	SelectableFields:       selectableFields,
	ShortNames:             []string{"po"},
	Categories:             []string{"all"},
}

// NewStorage returns the pods endpoints: pods, pods/status, pods/binding, pods/proxy (straight to the pod's
// IP, dialed with podDial), and pods/log, pods/exec and pods/portforward, which reach the kubelet of a
// pod's node as kubelets says.
func NewStorage(scheme *runtime.Scheme, optsGetter generic.RESTOptionsGetter, kubelets Kubelets, podDial proxyrest.DialFunc) (registry.Storage, error) {
	if err := addQueryConversions(scheme); err != nil {
		return nil, err
	}
	storage, main, err := registry.Build(scheme, Resource, optsGetter)
	if err != nil {
		return nil, err
	}
	kubelet := newKubeletClient(kubelets)
	storage["pods/binding"] = &BindingREST{store: main.Store}
	storage["pods/log"] = &LogREST{pods: main.Store, kubelet: kubelet}
	storage["pods/exec"] = &ExecREST{execStreams{pods: main.Store, kubelet: kubelet}}
	storage["pods/portforward"] = &PortForwardREST{portForwardStreams{pods: main.Store, kubelet: kubelet}}
	storage["pods/proxy"] = &ProxyREST{pods: main.Store, transport: proxyrest.NewTransport(podDial)}
	return storage, nil
}
