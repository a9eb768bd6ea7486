package chainaudit

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/storage"

	"github.com/rayctl/rayctl/pkg/chain"
)

// watchOnly is a storage whose watches are w (its other calls are not made here).
type watchOnly struct {
	storage.Interface
	w watch.Interface
}

func (s watchOnly) Watch(context.Context, string, storage.ListOptions) (watch.Interface, error) {
	return s.w, nil
}

func pod(name, rv string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("u-" + name), ResourceVersion: rv}}
}

// watchAs opens a watch through deliveryStorage as user with agent, its events coming from a fake.
func watchAs(t *testing.T, r *chain.Recorder, userName, agent string, opts storage.ListOptions) (*watch.FakeWatcher, watch.Interface) {
	t.Helper()
	fake := watch.NewFakeWithChanSize(10, false)
	ctx := request.WithUser(context.Background(), &user.DefaultInfo{Name: userName})
	ctx = context.WithValue(ctx, userAgentKey{}, agent)
	w, err := deliveryStorage{Interface: watchOnly{w: fake}, sink: r, kind: chain.KindPod}.Watch(ctx, "/pods", opts)
	if err != nil {
		t.Fatal(err)
	}
	return fake, w
}

func TestWatchDeliveriesRecordedPerWatcher(t *testing.T) {
	r := chain.New(100)
	fake, w := watchAs(t, r, "kuberay-operator", "kuberay-operator/v1.6.2", storage.ListOptions{})
	fake.Add(pod("head", "10"))
	fake.Modify(pod("head", "11"))
	fake.Action(watch.Bookmark, pod("", "12"))
	fake.Delete(pod("head", "13"))
	for _, want := range []watch.EventType{watch.Added, watch.Modified, watch.Bookmark, watch.Deleted} {
		if ev := <-w.ResultChan(); ev.Type != want {
			t.Fatalf("the watcher got %s, want %s", ev.Type, want)
		}
	}
	w.Stop()
	if _, open := <-w.ResultChan(); open {
		t.Fatal("the watch's channel is open after Stop")
	}
	if !fake.IsStopped() {
		t.Error("Stop did not stop the storage's watch")
	}
	got := r.Events(chain.Filter{Hop: chain.WatchDelivery})
	want := []struct {
		outcome chain.Outcome
		rv      string
	}{{chain.Create, "10"}, {chain.Update, "11"}, {chain.Delete, "13"}}
	if len(got) != len(want) {
		t.Fatalf("recorded %d deliveries, want %d (no bookmark): %+v", len(got), len(want), got)
	}
	for i, e := range got {
		if e.Outcome != want[i].outcome || e.Object.ResourceVersion != want[i].rv || e.Object.Kind != chain.KindPod || e.Object.Name != "head" || e.Object.UID != "u-head" {
			t.Errorf("delivery %d: %+v, want %s of Pod ns/head rv %s", i, e, want[i].outcome, want[i].rv)
		}
		if e.Call == nil || e.Call.User != "kuberay-operator" || e.Call.UserAgent != "kuberay-operator/v1.6.2" || e.Call.Verb != "watch" {
			t.Errorf("delivery %d names the watcher %+v", i, e.Call)
		}
	}
}

func TestWatchListInitialEventsNotRecorded(t *testing.T) {
	r := chain.New(100)
	yes := true
	fake, w := watchAs(t, r, "u", "", storage.ListOptions{SendInitialEvents: &yes})
	end := pod("", "20")
	end.Annotations = map[string]string{metav1.InitialEventsAnnotationKey: "true"}
	fake.Add(pod("old", "5"))
	fake.Action(watch.Bookmark, end)
	fake.Modify(pod("old", "21"))
	for range 3 {
		<-w.ResultChan()
	}
	w.Stop()
	// A delivery is recorded once the watcher took it: the channel closes after the last is recorded.
	for range w.ResultChan() {
	}
	got := r.Events(chain.Filter{Hop: chain.WatchDelivery})
	if len(got) != 1 || got[0].Object.ResourceVersion != "21" {
		t.Fatalf("recorded %+v, want only the update after the initial events", got)
	}
}

func TestWatchStoppedWhileUnread(t *testing.T) {
	r := chain.New(100)
	fake, w := watchAs(t, r, "u", "", storage.ListOptions{})
	fake.Add(pod("p", "1"))
	// Nobody reads: the event waits in the pass-through until Stop ends it.
	w.Stop()
	for range w.ResultChan() {
	}
	if n := len(r.Events(chain.Filter{Hop: chain.WatchDelivery})); n > 1 {
		t.Errorf("recorded %d deliveries of one event", n)
	}
}

func TestFollowedReadResources(t *testing.T) {
	for gr, want := range map[schema.GroupResource]bool{
		{Resource: "pods"}: true, {Group: "ray.io", Resource: "rayjobs"}: true, {Group: "batch", Resource: "jobs"}: true,
		{Resource: "events"}: false, {Group: "coordination.k8s.io", Resource: "leases"}: false,
	} {
		if followedRead(gr) != want {
			t.Errorf("followedRead(%v) = %v, want %v", gr, !want, want)
		}
	}
}

func TestWithUserAgentOnWatchesOnly(t *testing.T) {
	var got []string
	h := WithUserAgent(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		ua, _ := r.Context().Value(userAgentKey{}).(string)
		got = append(got, ua)
	}))
	for _, verb := range []string{"watch", "list"} {
		req := httptest.NewRequest("GET", "/api/v1/pods", nil)
		req.Header.Set("User-Agent", "kuberay-operator/v1.6.2")
		req = req.WithContext(request.WithRequestInfo(req.Context(), &request.RequestInfo{IsResourceRequest: true, Verb: verb, Resource: "pods"}))
		h.ServeHTTP(httptest.NewRecorder(), req)
	}
	if len(got) != 2 || got[0] != "kuberay-operator/v1.6.2" || got[1] != "" {
		t.Errorf("User-Agent in the context of a watch and a list: %q", got)
	}
}
