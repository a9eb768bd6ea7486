package serviceproxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"reflect"
	"sort"
	"sync"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// UserAgent is the user agent the proxy's API requests carry.
const UserAgent = "rayctl/service-proxy"

// TableName is the nftables table (family ip) the proxy owns in the node namespace.
const TableName = "rayctl-services"

// DefaultMinSyncInterval is the least time between two rewrites of the table: changes that arrive closer
// together (a RayCluster's pods becoming ready one after another) are written together.
const DefaultMinSyncInterval = 100 * time.Millisecond

// Options configures a Proxy.
type Options struct {
	// RESTConfig reaches the API server Services and EndpointSlices are read from.
	RESTConfig *rest.Config
	// Table is where the rules go (the node namespace, its bridge, the service range).
	Table TableOptions
	// MinSyncInterval is the least time between two rewrites; DefaultMinSyncInterval when zero.
	MinSyncInterval time.Duration
}

// TableOptions says where a Table lives.
type TableOptions struct {
	// NetNS is the network namespace's file (rayctl's node namespace); empty is this process's own.
	NetNS string
	// Bridge is the pod bridge's name in NetNS: the service range is routed onto it so that the node
	// namespace's own connections to a ClusterIP leave by a route and are translated on the way out.
	Bridge string
	// Gateway is the bridge's address, the source of the node namespace's connections to ClusterIPs.
	Gateway net.IP
	// ServiceCIDR is the range ClusterIPs come from.
	ServiceCIDR *net.IPNet
	// MasqueradePods masquerades every pod's connection to a ClusterIP, not only an endpoint's to itself:
	// where the IPv4 hooks do not see what the bridge passes between pods (no br_netfilter), the reply of
	// one pod to another would go straight over the bridge, untranslated, unless it comes back by the node.
	MasqueradePods bool
}

// SyncStats says what the table's rewrites cost.
type SyncStats struct {
	// Syncs counts rewrites (changes that change no rule cause none); Ports is how many ClusterIP ports the last one held.
	Syncs, Ports int
	// Last is how long the last rewrite took (building the rules and the nftables transaction); Max the
	// longest so far.
	Last, Max time.Duration
}

// Proxy keeps the table in step with the cluster's Services and EndpointSlices.
type Proxy struct {
	opts     Options
	factory  informers.SharedInformerFactory
	services corelisters.ServiceLister
	slices   discoverylisters.EndpointSliceLister
	synced   []cache.InformerSynced
	changed  chan struct{}
	table    *Table

	written []Port // what the table holds, after the last successful write

	mu    sync.Mutex
	stats SyncStats
}

// New prepares the informers and opens the table (empty; the route to the service range in place); nothing
// is watched before Run, which removes the table when it returns.
func New(opts Options) (*Proxy, error) {
	if opts.RESTConfig == nil {
		return nil, errors.New("service proxy: no REST config")
	}
	if opts.Table.ServiceCIDR == nil || opts.Table.Gateway.To4() == nil || opts.Table.Bridge == "" {
		return nil, errors.New("service proxy: the table needs a service range, a bridge and its IPv4 gateway")
	}
	if opts.MinSyncInterval <= 0 {
		opts.MinSyncInterval = DefaultMinSyncInterval
	}
	cfg := rest.CopyConfig(opts.RESTConfig)
	if cfg.UserAgent == "" {
		cfg.UserAgent = UserAgent
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	f := informers.NewSharedInformerFactory(client, 0)
	p := &Proxy{opts: opts, factory: f, changed: make(chan struct{}, 1),
		services: f.Core().V1().Services().Lister(), slices: f.Discovery().V1().EndpointSlices().Lister()}
	notify := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { p.poke() },
		UpdateFunc: func(any, any) { p.poke() },
		DeleteFunc: func(any) { p.poke() },
	}
	for _, inf := range []cache.SharedIndexInformer{f.Core().V1().Services().Informer(), f.Discovery().V1().EndpointSlices().Informer()} {
		if _, err := inf.AddEventHandler(notify); err != nil {
			return nil, err
		}
		p.synced = append(p.synced, inf.HasSynced)
	}
	if p.table, err = OpenTable(opts.Table); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *Proxy) poke() {
	select {
	case p.changed <- struct{}{}:
	default:
	}
}

// Run writes the table once the caches are filled and again after every change (at most every
// MinSyncInterval), and removes it, with the route to the service range, when ctx ends.
func (p *Proxy) Run(ctx context.Context) error {
	t := p.table
	defer func() {
		if err := t.Close(); err != nil {
			klog.ErrorS(err, "service proxy: removing the table")
		}
	}()
	p.factory.Start(ctx.Done())
	defer p.factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), p.synced...) {
		return nil
	}
	p.poke()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-p.changed:
		}
		if err := p.sync(t); err != nil {
			// Tried again at the next change, or within a second.
			klog.ErrorS(err, "service proxy: writing the table")
			time.AfterFunc(time.Second, p.poke)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(p.opts.MinSyncInterval):
		}
	}
}

// sync writes every proxied Service's ports.
func (p *Proxy) sync(t *Table) error {
	start := time.Now()
	svcs, err := p.services.List(labels.Everything())
	if err != nil {
		return err
	}
	sort.Slice(svcs, func(i, j int) bool {
		return svcs[i].Namespace+"/"+svcs[i].Name < svcs[j].Namespace+"/"+svcs[j].Name
	})
	var ports []Port
	for _, svc := range svcs {
		if !Proxied(svc) {
			continue
		}
		sel := labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: svc.Name})
		slices, err := p.slices.EndpointSlices(svc.Namespace).List(sel)
		if err != nil {
			return err
		}
		ports = append(ports, Ports(svc, slices)...)
	}
	if p.stats.Syncs > 0 && reflect.DeepEqual(ports, p.written) {
		return nil // a change that changes no rule (a Pod's status, a Service's labels)
	}
	if err := t.Write(ports); err != nil {
		return fmt.Errorf("%d ports: %w", len(ports), err)
	}
	p.written = ports
	d := time.Since(start)
	klog.V(2).InfoS("service proxy: table written", "ports", len(ports), "took", d)
	p.mu.Lock()
	p.stats.Syncs++
	p.stats.Ports = len(ports)
	p.stats.Last = d
	p.stats.Max = max(p.stats.Max, d)
	p.mu.Unlock()
	return nil
}

// Stats returns what the rewrites so far cost.
func (p *Proxy) Stats() SyncStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}
