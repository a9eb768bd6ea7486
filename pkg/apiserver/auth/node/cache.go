package node

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/runtime"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// byNode indexes cached pods by "namespace/node".
const byNode = "namespace/node"

// CachedPods answers from an informer's cache of every bound Pod, indexed by namespace and node: a
// lookup costs the node's pods in that namespace, not a LIST through the API server. A cache may lag
// behind a pod just bound, so the authorizer asks it first and a consistent source (APIPods) after it
// when the cache shows no pod that uses the object. The other way round, a pod just deleted still grants
// its objects until the cache hears of the deletion (as Kubernetes' informer-fed node graph does).
type CachedPods struct {
	informer cache.SharedIndexInformer
}

// NewCachedPods returns a cache of the pods client can list; Run fills it.
func NewCachedPods(client kubernetes.Interface) *CachedPods {
	inf := coreinformers.NewFilteredPodInformer(client, metav1.NamespaceAll, 0,
		cache.Indexers{byNode: func(obj any) ([]string, error) {
			pod, ok := obj.(*corev1.Pod)
			if !ok {
				return nil, nil
			}
			return []string{pod.Namespace + "/" + pod.Spec.NodeName}, nil
		}},
		func(o *metav1.ListOptions) { o.FieldSelector = "spec.nodeName!=" })
	// Only the spec says what a pod references: the rest is not kept.
	runtime.Must(inf.SetTransform(func(obj any) (any, error) {
		if pod, ok := obj.(*corev1.Pod); ok {
			pod.ManagedFields, pod.Annotations, pod.Status = nil, nil, corev1.PodStatus{}
		}
		return obj, nil
	}))
	return &CachedPods{informer: inf}
}

// Run fills the cache and keeps it current until ctx ends.
func (c *CachedPods) Run(ctx context.Context) { c.informer.RunWithContext(ctx) }

// OnNode implements Pods: the cached pods of namespace bound to node (none until the cache has synced).
// They are the cache's own objects, to be read only.
func (c *CachedPods) OnNode(_ context.Context, namespace, node string) ([]*corev1.Pod, error) {
	objs, err := c.informer.GetIndexer().ByIndex(byNode, namespace+"/"+node)
	if err != nil {
		return nil, err
	}
	out := make([]*corev1.Pod, 0, len(objs))
	for _, o := range objs {
		if pod, ok := o.(*corev1.Pod); ok {
			out = append(out, pod)
		}
	}
	return out, nil
}

// Pod returns the cached pod namespace/name (spec only), nil when the cache holds none. It is the
// cache's own object, to be read only.
func (c *CachedPods) Pod(namespace, name string) *corev1.Pod {
	obj, ok, err := c.informer.GetIndexer().GetByKey(namespace + "/" + name)
	if err != nil || !ok {
		return nil
	}
	pod, _ := obj.(*corev1.Pod)
	return pod
}
