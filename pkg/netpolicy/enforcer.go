package netpolicy

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// Options configure an Enforcer.
type Options struct {
	// RESTConfig reaches the API server, as the enforcer's own identity.
	RESTConfig *rest.Config
	// NetNS is the node network namespace whose forward path the table filters.
	NetNS string
	// Settle is how long the enforcer waits after a change for more before it writes the table, so a
	// burst of changes (a RayCluster's pods starting) is one write (default 50 ms).
	Settle time.Duration
	// Written, when set, is told after each write: the ruleset, how long the write took, and its error.
	Written func(r *Ruleset, took time.Duration, err error)
}

// Enforcer keeps the rayctl-policy table in step with the API's NetworkPolicies, Pods and Namespaces.
type Enforcer struct {
	opts    Options
	factory informers.SharedInformerFactory
	pols    cache.SharedIndexInformer
	pods    cache.SharedIndexInformer
	nss     cache.SharedIndexInformer
	kick    chan struct{}
	table   writer
}

// New makes an Enforcer, with its nftables connection in the node namespace; Run starts it.
func New(opts Options) (*Enforcer, error) {
	if opts.Settle == 0 {
		opts.Settle = 50 * time.Millisecond
	}
	cs, err := kubernetes.NewForConfig(rest.CopyConfig(opts.RESTConfig))
	if err != nil {
		return nil, err
	}
	t, err := openWriter(opts.NetNS)
	if err != nil {
		return nil, err
	}
	f := informers.NewSharedInformerFactory(cs, 0)
	e := &Enforcer{opts: opts, factory: f, kick: make(chan struct{}, 1), table: t,
		pols: f.Networking().V1().NetworkPolicies().Informer(),
		pods: f.Core().V1().Pods().Informer(),
		nss:  f.Core().V1().Namespaces().Informer(),
	}
	// The caches keep only what policies look at.
	if err := e.pods.SetTransform(slimPod); err != nil {
		return nil, err
	}
	if err := e.nss.SetTransform(slimNamespace); err != nil {
		return nil, err
	}
	h := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { e.changed() },
		UpdateFunc: func(any, any) { e.changed() },
		DeleteFunc: func(any) { e.changed() },
	}
	for _, inf := range []cache.SharedIndexInformer{e.pols, e.pods, e.nss} {
		if _, err := inf.AddEventHandler(h); err != nil {
			return nil, err
		}
	}
	return e, nil
}

func (e *Enforcer) changed() {
	select {
	case e.kick <- struct{}{}:
	default:
	}
}

// Run writes the table once the caches are filled and again after every burst of changes, until ctx
// ends; then it removes the table.
func (e *Enforcer) Run(ctx context.Context) error {
	t := e.table
	defer t.Close()
	e.factory.Start(ctx.Done())
	defer e.factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), e.pols.HasSynced, e.pods.HasSynced, e.nss.HasSynced) {
		return ctx.Err()
	}
	var last *Ruleset
	for {
		r := e.compile()
		if !r.Equal(last) {
			start := time.Now()
			err := t.Write(r)
			if e.opts.Written != nil {
				e.opts.Written(r, time.Since(start), err)
			}
			if err == nil {
				last = r
			} else {
				// Tried again at the next change, or after a second.
				go func() {
					select {
					case <-time.After(time.Second):
						e.changed()
					case <-ctx.Done():
					}
				}()
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-e.kick:
		}
		// Let the burst settle.
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(e.opts.Settle):
		}
	}
}

// compile works out the ruleset from the informers' caches.
func (e *Enforcer) compile() *Ruleset {
	var pols []*networkingv1.NetworkPolicy
	var pods []*corev1.Pod
	var nss []*corev1.Namespace
	for _, o := range e.pols.GetStore().List() {
		pols = append(pols, o.(*networkingv1.NetworkPolicy))
	}
	if len(pols) == 0 {
		return &Ruleset{}
	}
	for _, o := range e.pods.GetStore().List() {
		pods = append(pods, o.(*corev1.Pod))
	}
	for _, o := range e.nss.GetStore().List() {
		nss = append(nss, o.(*corev1.Namespace))
	}
	return Compile(pols, pods, nss)
}

// slimPod keeps of a pod what policies look at: its name, namespace and labels, whether it is on the
// host's network, its containers' ports, its phase and address.
func slimPod(o any) (any, error) {
	p, ok := o.(*corev1.Pod)
	if !ok {
		return o, nil
	}
	ports := func(cs []corev1.Container) []corev1.Container {
		var out []corev1.Container
		for _, c := range cs {
			if len(c.Ports) > 0 {
				out = append(out, corev1.Container{Name: c.Name, Ports: c.Ports})
			}
		}
		return out
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, Labels: p.Labels, UID: p.UID, ResourceVersion: p.ResourceVersion},
		Spec:       corev1.PodSpec{HostNetwork: p.Spec.HostNetwork, Containers: ports(p.Spec.Containers), InitContainers: ports(p.Spec.InitContainers)},
		Status:     corev1.PodStatus{Phase: p.Status.Phase, PodIP: p.Status.PodIP},
	}, nil
}

// slimNamespace keeps a namespace's name and labels.
func slimNamespace(o any) (any, error) {
	n, ok := o.(*corev1.Namespace)
	if !ok {
		return o, nil
	}
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: n.Labels, UID: n.UID, ResourceVersion: n.ResourceVersion}}, nil
}

// writer is the table (Linux) a ruleset is written to.
type writer interface {
	Write(r *Ruleset) error
	Close() error
}

// Describe says what a ruleset holds, for logs.
func Describe(r *Ruleset) string {
	return fmt.Sprintf("%d pods isolated for ingress, %d for egress, %d allow entries", len(r.Ingress), len(r.Egress), r.Rules())
}

// TableName is the nftables table (family ip) netpolicy owns in the node namespace.
const TableName = "rayctl-policy"
