package ui

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"sync"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	rayclient "github.com/ray-project/kuberay/ray-operator/pkg/client/clientset/versioned"
	rayinformers "github.com/ray-project/kuberay/ray-operator/pkg/client/informers/externalversions"
	"k8s.io/client-go/tools/cache"
)

// ObjectView is one RayJob or RayCluster in the page's list.
type ObjectView struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// State is a RayJob's jobDeploymentStatus (with its jobStatus) or a RayCluster's state.
	State string `json:"state"`
	// Created is the creation time (RFC 3339); the page shows the age from it.
	Created time.Time `json:"created"`
	// Finished marks a RayJob that reached Complete or Failed (the page offers its replay).
	Finished bool `json:"finished,omitempty"`
	// Deleted is set on the event that removes the object from the list.
	Deleted bool `json:"deleted,omitempty"`
}

// objectFeed keeps the RayJobs and RayClusters with informers and hands their changes to the page's
// streams.
type objectFeed struct {
	factory rayinformers.SharedInformerFactory
	jobs    cache.SharedIndexInformer
	cls     cache.SharedIndexInformer

	mu   sync.Mutex
	subs map[chan ObjectView]struct{}
}

func newObjectFeed(ray rayclient.Interface) *objectFeed {
	f := rayinformers.NewSharedInformerFactory(ray, 0)
	return &objectFeed{factory: f, jobs: f.Ray().V1().RayJobs().Informer(), cls: f.Ray().V1().RayClusters().Informer(),
		subs: map[chan ObjectView]struct{}{}}
}

// start runs the informers and waits for their first list.
func (o *objectFeed) start(ctx context.Context) error {
	h := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { o.publish(obj, false) },
		UpdateFunc: func(_, obj any) { o.publish(obj, false) },
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			o.publish(obj, true)
		},
	}
	for _, inf := range []cache.SharedIndexInformer{o.jobs, o.cls} {
		if _, err := inf.AddEventHandler(h); err != nil {
			return err
		}
	}
	o.factory.Start(ctx.Done())
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if !cache.WaitForCacheSync(sctx.Done(), o.jobs.HasSynced, o.cls.HasSynced) {
		return fmt.Errorf("listing RayJobs and RayClusters: no answer within 30s (is rayctl up running?)")
	}
	return nil
}

// viewOf is the list's line for a RayJob or RayCluster (ok false for anything else).
func viewOf(obj any) (ObjectView, bool) {
	switch x := obj.(type) {
	case *rayv1.RayJob:
		state := string(x.Status.JobDeploymentStatus)
		if x.Status.JobStatus != "" {
			state += " (" + string(x.Status.JobStatus) + ")"
		}
		return ObjectView{Kind: "RayJob", Namespace: x.Namespace, Name: x.Name, State: state, Created: x.CreationTimestamp.Time,
			Finished: rayv1.IsJobDeploymentTerminal(x.Status.JobDeploymentStatus)}, true
	case *rayv1.RayCluster:
		return ObjectView{Kind: "RayCluster", Namespace: x.Namespace, Name: x.Name, State: string(x.Status.State), Created: x.CreationTimestamp.Time}, true
	}
	return ObjectView{}, false
}

func (o *objectFeed) publish(obj any, deleted bool) {
	v, ok := viewOf(obj)
	if !ok {
		return
	}
	v.Deleted = deleted
	o.mu.Lock()
	defer o.mu.Unlock()
	for ch := range o.subs {
		select {
		case ch <- v:
		default: // a reader that far behind resyncs on its next connection
		}
	}
}

// related are the objects whose chains belong with kind ns/name's: a RayJob's RayCluster.
func (o *objectFeed) related(kind, ns, name string) []objectRef {
	if kind != "RayJob" {
		return nil
	}
	obj, ok, err := o.jobs.GetStore().GetByKey(ns + "/" + name)
	if err != nil || !ok {
		return nil
	}
	if c := obj.(*rayv1.RayJob).Status.RayClusterName; c != "" {
		return []objectRef{{kind: "RayCluster", name: c}}
	}
	return nil
}

// list is every object now, sorted.
func (o *objectFeed) list() []ObjectView {
	var out []ObjectView
	for _, inf := range []cache.SharedIndexInformer{o.jobs, o.cls} {
		for _, obj := range inf.GetStore().List() {
			if v, ok := viewOf(obj); ok {
				out = append(out, v)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Kind != b.Kind {
			return a.Kind > b.Kind // RayJobs first
		}
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
	return out
}

// serveObjects streams the list: every object now ("objects"), then each change ("object").
func (s *Server) serveObjects(w http.ResponseWriter, r *http.Request) {
	ch := make(chan ObjectView, 1024)
	o := s.objects
	o.mu.Lock()
	o.subs[ch] = struct{}{}
	o.mu.Unlock()
	defer func() {
		o.mu.Lock()
		delete(o.subs, ch)
		o.mu.Unlock()
	}()
	out := startSSE(w)
	if out == nil {
		return
	}
	if out.send("objects", o.list()) != nil {
		return
	}
	for {
		select {
		case <-r.Context().Done():
			return
		case v := <-ch:
			if out.send("object", v) != nil {
				return
			}
		}
	}
}
