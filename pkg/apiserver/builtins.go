package apiserver

import (
	"crypto/tls"
	"fmt"
	"net"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/registry/rest"
	genericapiserver "k8s.io/apiserver/pkg/server"

	satoken "github.com/rayctl/rayctl/pkg/apiserver/auth/serviceaccount"
	"github.com/rayctl/rayctl/pkg/apiserver/registry"
	"github.com/rayctl/rayctl/pkg/apiserver/registry/apps/controllerrevision"
	"github.com/rayctl/rayctl/pkg/apiserver/registry/apps/daemonset"
	"github.com/rayctl/rayctl/pkg/apiserver/registry/apps/deployment"
	"github.com/rayctl/rayctl/pkg/apiserver/registry/apps/replicaset"
	"github.com/rayctl/rayctl/pkg/apiserver/registry/apps/statefulset"
	"github.com/rayctl/rayctl/pkg/apiserver/registry/authentication/selfsubjectreview"
	"github.com/rayctl/rayctl/pkg/apiserver/registry/authentication/tokenreview"
	"github.com/rayctl/rayctl/pkg/apiserver/registry/authorization/accessreview"
	"github.com/rayctl/rayctl/pkg/apiserver/registry/authorization/rulesreview"
	"github.com/rayctl/rayctl/pkg/apiserver/registry/batch/job"
	"github.com/rayctl/rayctl/pkg/apiserver/registry/coordination/lease"
	"github.com/rayctl/rayctl/pkg/apiserver/registry/core/configmap"
	"github.com/rayctl/rayctl/pkg/apiserver/registry/core/endpoints"
	coreevent "github.com/rayctl/rayctl/pkg/apiserver/registry/core/event"
	"github.com/rayctl/rayctl/pkg/apiserver/registry/core/namespace"
	"github.com/rayctl/rayctl/pkg/apiserver/registry/core/node"
	"github.com/rayctl/rayctl/pkg/apiserver/registry/core/persistentvolume"
	"github.com/rayctl/rayctl/pkg/apiserver/registry/core/persistentvolumeclaim"
	"github.com/rayctl/rayctl/pkg/apiserver/registry/core/pod"
	"github.com/rayctl/rayctl/pkg/apiserver/registry/core/secret"
	"github.com/rayctl/rayctl/pkg/apiserver/registry/core/service"
	"github.com/rayctl/rayctl/pkg/apiserver/registry/core/serviceaccount"
	"github.com/rayctl/rayctl/pkg/apiserver/registry/discovery/endpointslice"
	eventsevent "github.com/rayctl/rayctl/pkg/apiserver/registry/events/event"
	"github.com/rayctl/rayctl/pkg/apiserver/registry/networking/ingress"
	"github.com/rayctl/rayctl/pkg/apiserver/registry/networking/ingressclass"
	"github.com/rayctl/rayctl/pkg/apiserver/registry/networking/networkpolicy"
	"github.com/rayctl/rayctl/pkg/apiserver/registry/node/runtimeclass"
	"github.com/rayctl/rayctl/pkg/apiserver/registry/proxyrest"
	"github.com/rayctl/rayctl/pkg/apiserver/registry/rbac"
	"github.com/rayctl/rayctl/pkg/apiserver/registry/storage/storageclass"
	"github.com/rayctl/rayctl/pkg/apiserver/scheme"
)

// DefaultServiceCIDR is the range ClusterIPs come from unless configured otherwise.
const DefaultServiceCIDR = "10.96.0.0/16"

// builtins holds the storage of every built-in group, by group version.
type builtins map[schema.GroupVersion]registry.Storage

// newBuiltins builds the storage of every built-in resource. kubeletTLS is the client configuration
// pods/log, pods/exec and pods/portforward reach kubelets with (nil turns them off); tokens signs what
// serviceaccounts/token issues; reviewer answers tokenreviews.
func newBuiltins(optsGetter generic.RESTOptionsGetter, authz authorizer.Authorizer, rules authorizer.RuleResolver, serviceCIDR *net.IPNet, kubeletTLS *tls.Config, tokens *satoken.Issuer, reviewer *tokenreview.REST, podDial proxyrest.DialFunc) (builtins, error) {
	b := builtins{}
	add := func(gv schema.GroupVersion, s registry.Storage, err error) error {
		if err != nil {
			return err
		}
		if b[gv] == nil {
			b[gv] = registry.Storage{}
		}
		for path, storage := range s {
			b[gv][path] = storage
		}
		return nil
	}
	plain := func(r *registry.Resource) error {
		s, _, err := registry.Build(scheme.Scheme, r, optsGetter)
		return add(r.GroupVersion(), s, err)
	}
	s := scheme.Scheme
	core := pod.Resource.GroupVersion()
	nodes, nodeStore, err := registry.Build(s, node.Resource, optsGetter)
	if err := add(core, nodes, err); err != nil {
		return nil, err
	}
	pods, err := pod.NewStorage(s, optsGetter, pod.Kubelets{Nodes: nodeStore, TLS: kubeletTLS}, podDial)
	if err := add(core, pods, err); err != nil {
		return nil, err
	}
	accounts, accountStore, err := registry.Build(s, serviceaccount.Resource, optsGetter)
	if err == nil {
		accounts["serviceaccounts/token"] = &serviceaccount.TokenREST{ServiceAccounts: accountStore, Pods: pods["pods"].(rest.Getter), Issuer: tokens}
	}
	if err := add(core, accounts, err); err != nil {
		return nil, err
	}
	slices, sliceStore, err := registry.Build(s, endpointslice.Resource, optsGetter)
	if err := add(endpointslice.Resource.GroupVersion(), slices, err); err != nil {
		return nil, err
	}
	services, err := service.NewStorage(s, optsGetter, serviceCIDR, sliceStore.Store, podDial)
	if err := add(core, services, err); err != nil {
		return nil, err
	}
	namespaces, err := namespace.NewStorage(s, optsGetter)
	if err := add(core, namespaces, err); err != nil {
		return nil, err
	}
	for _, r := range []*registry.Resource{
		configmap.Resource, secret.Resource, endpoints.Resource,
		coreevent.Resource, eventsevent.Resource, lease.Resource, job.Resource,
		persistentvolumeclaim.Resource, persistentvolume.Resource, storageclass.Resource,
		ingress.Resource, ingressclass.Resource, networkpolicy.Resource, runtimeclass.Resource,
		deployment.Resource, replicaset.Resource, statefulset.Resource, daemonset.Resource, controllerrevision.Resource,
	} {
		if err := plain(r); err != nil {
			return nil, err
		}
	}
	// RBAC writes are weighed against what their author holds (privilege escalation prevention).
	rbacStorage, err := rbac.NewStorage(s, optsGetter, authz)
	if err := add(rbac.Roles.GroupVersion(), rbacStorage, err); err != nil {
		return nil, err
	}
	authzGV := schema.GroupVersion{Group: "authorization.k8s.io", Version: "v1"}
	if err := add(authzGV, registry.Storage{
		"subjectaccessreviews":     &accessreview.SubjectREST{Authorizer: authz},
		"selfsubjectaccessreviews": &accessreview.SelfREST{Authorizer: authz},
		"selfsubjectrulesreviews":  &rulesreview.REST{Resolver: rules},
	}, nil); err != nil {
		return nil, err
	}
	authnGV := schema.GroupVersion{Group: "authentication.k8s.io", Version: "v1"}
	if err := add(authnGV, registry.Storage{"selfsubjectreviews": &selfsubjectreview.REST{}, "tokenreviews": reviewer}, nil); err != nil {
		return nil, err
	}
	return b, nil
}

// install serves the core group under /api and the others under /apis.
func (b builtins) install(server *genericapiserver.GenericAPIServer) error {
	var groups []*genericapiserver.APIGroupInfo
	for gv, storage := range b {
		info := genericapiserver.NewDefaultAPIGroupInfo(gv.Group, scheme.Scheme, scheme.ParameterCodec, scheme.Codecs)
		info.VersionedResourcesStorageMap[gv.Version] = storage
		if gv.Group == "" {
			if err := server.InstallLegacyAPIGroup(genericapiserver.DefaultLegacyAPIPrefix, &info); err != nil {
				return fmt.Errorf("installing the core group: %w", err)
			}
			continue
		}
		groups = append(groups, &info)
	}
	if err := server.InstallAPIGroups(groups...); err != nil {
		return fmt.Errorf("installing the built-in groups: %w", err)
	}
	return nil
}
