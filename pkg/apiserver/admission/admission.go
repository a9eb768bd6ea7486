// Package admission is the API server's admission chain: Kubernetes' NamespaceLifecycle plugin, and
// rayctl's own ServiceAccount (a pod's account and token volume) and NodeRestriction (a kubelet writes
// only its own node's objects) plugins, which do what kube-apiserver's plugins of those names do. In this package's code, admission names
// k8s.io/apiserver/pkg/admission, whose interfaces the plugins implement.
package admission

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/plugin/namespace/lifecycle"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	nodeauth "github.com/rayctl/rayctl/pkg/apiserver/auth/node"
)

// New builds the admission chain: NamespaceLifecycle, which refuses objects in namespaces that do
// not exist or are being deleted, as every real cluster does, then ServiceAccount, which gives pods their
// account and its token volume (see serviceAccountAdmission), then NodeRestriction, which keeps each
// kubelet's writes to its own node (see nodeRestriction), looking the pods of kubelets' token requests up
// in nodePods (the node authorizer's cache) before reading them through the API, then the plugins in more. The namespace and
// ServiceAccount informers start with the server, through the loopback client: the server runs the
// returned hook after it starts serving.
func New(loopback *rest.Config, nodePods *nodeauth.CachedPods, more ...admission.Interface) (admission.Interface, genericapiserver.PostStartHookFunc, error) {
	client, err := kubernetes.NewForConfig(loopback)
	if err != nil {
		return nil, nil, err
	}
	factory := informers.NewSharedInformerFactory(client, 0)
	nsLifecycle, err := lifecycle.NewLifecycle(sets.New(metav1.NamespaceDefault, metav1.NamespaceSystem, metav1.NamespacePublic))
	if err != nil {
		return nil, nil, err
	}
	nsLifecycle.SetExternalKubeInformerFactory(factory)
	nsLifecycle.SetExternalKubeClientSet(client)
	if err := nsLifecycle.ValidateInitialization(); err != nil {
		return nil, nil, err
	}
	accounts := factory.Core().V1().ServiceAccounts().Lister()
	start := func(ctx genericapiserver.PostStartHookContext) error {
		factory.Start(ctx.Done())
		factory.WaitForCacheSync(ctx.Done())
		return nil
	}
	pod := func(ctx context.Context, namespace, name string) (*corev1.Pod, error) {
		return client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
	}
	restriction := newNodeRestriction(pod)
	restriction.cached = nodePods.Pod
	return admission.NewChainHandler(append([]admission.Interface{nsLifecycle, newServiceAccountAdmission(accounts), restriction}, more...)...), start, nil
}
