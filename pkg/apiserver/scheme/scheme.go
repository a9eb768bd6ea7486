// Package scheme holds the runtime.Scheme of rayctl's built-in API groups.
//
// rayctl serves the k8s.io/api types directly. The generic API server converts every request through an
// "__internal" hub version, so each external kind is registered a second time as its group's internal
// kind: the two are the same Go type and conversion between them is the identity.
package scheme

import (
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	"reflect"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	nodev1 "k8s.io/api/node/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	apiextensionsinstall "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/install"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"

	"github.com/rayctl/rayctl/pkg/apiserver/defaults"
)

// Scheme knows every built-in kind rayctl serves, in its v1 and internal versions.
var Scheme = runtime.NewScheme()

// Codecs encodes and decodes the kinds of Scheme.
var Codecs = serializer.NewCodecFactory(Scheme)

// ParameterCodec decodes query parameters into option structs.
var ParameterCodec = runtime.NewParameterCodec(Scheme)

// GroupVersions lists the external group versions served, core first.
var GroupVersions = []schema.GroupVersion{
	corev1.SchemeGroupVersion,
	batchv1.SchemeGroupVersion,
	appsv1.SchemeGroupVersion,
	autoscalingv1.SchemeGroupVersion,
	rbacv1.SchemeGroupVersion,
	coordinationv1.SchemeGroupVersion,
	eventsv1.SchemeGroupVersion,
	discoveryv1.SchemeGroupVersion,
	storagev1.SchemeGroupVersion,
	networkingv1.SchemeGroupVersion,
	nodev1.SchemeGroupVersion,
	authorizationv1.SchemeGroupVersion,
	authenticationv1.SchemeGroupVersion,
}

var addToScheme = []func(*runtime.Scheme) error{
	corev1.AddToScheme,
	batchv1.AddToScheme,
	appsv1.AddToScheme,
	autoscalingv1.AddToScheme,
	rbacv1.AddToScheme,
	coordinationv1.AddToScheme,
	eventsv1.AddToScheme,
	discoveryv1.AddToScheme,
	storagev1.AddToScheme,
	networkingv1.AddToScheme,
	nodev1.AddToScheme,
	authorizationv1.AddToScheme,
	authenticationv1.AddToScheme,
}

func init() {
	for _, add := range addToScheme {
		utilruntime.Must(add(Scheme))
	}
	for _, gv := range GroupVersions {
		registerInternal(gv)
	}
	// CustomResourceDefinitions are stored through the same storage factory as the built-in kinds.
	apiextensionsinstall.Install(Scheme)
	defaults.RegisterDefaults(Scheme)
	utilruntime.Must(addEventConversions(Scheme))
	metav1.AddToGroupVersion(Scheme, schema.GroupVersion{Version: "v1"})
	Scheme.AddUnversionedTypes(schema.GroupVersion{Version: "v1"},
		&metav1.Status{}, &metav1.APIVersions{}, &metav1.APIGroupList{}, &metav1.APIGroup{}, &metav1.APIResourceList{})
}

// registerInternal registers each kind defined in gv's own Go package again under the group's internal version.
// Kinds that apimachinery registers for every group (options, WatchEvent) are left alone.
func registerInternal(gv schema.GroupVersion) {
	internal := schema.GroupVersion{Group: gv.Group, Version: runtime.APIVersionInternal}
	known := Scheme.KnownTypes(internal)
	for kind, t := range Scheme.KnownTypes(gv) {
		if _, taken := known[kind]; taken {
			continue
		}
		if t.PkgPath() == reflect.TypeOf(metav1.Status{}).PkgPath() {
			continue
		}
		Scheme.AddKnownTypeWithName(internal.WithKind(kind), reflect.New(t).Interface().(runtime.Object))
	}
}

// InternalVersion returns the internal group version of gv's group.
func InternalVersion(gv schema.GroupVersion) schema.GroupVersion {
	return schema.GroupVersion{Group: gv.Group, Version: runtime.APIVersionInternal}
}
