package ctrlset

import (
	"reflect"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func registry(names ...string) *Registry {
	r := &Registry{}
	for _, n := range names {
		r.Register(n, func(ctrl.Manager, Env) error { return nil })
	}
	return r
}

func TestSelect(t *testing.T) {
	r := registry("raycluster", "rayjob", "job", "gc")
	for spec, want := range map[string]string{
		"":                      "raycluster,rayjob,job,gc",
		"all":                   "raycluster,rayjob,job,gc",
		"*,-job":                "raycluster,rayjob,gc",
		"none":                  "",
		"rayjob,raycluster":     "raycluster,rayjob",
		"none,raycluster":       "raycluster",
		"all,-gc,-job,-rayjob":  "raycluster",
		"-job":                  "raycluster,rayjob,gc",
		"-gc, -job":             "raycluster,rayjob",
		"-job,rayjob":           "rayjob",
		",":                     "raycluster,rayjob,job,gc",
		" raycluster , rayjob ": "raycluster,rayjob",
	} {
		var s []string
		if spec != "" {
			s = strings.Split(spec, ",")
		}
		got, err := r.Select(s)
		if err != nil {
			t.Errorf("%q: %v", spec, err)
			continue
		}
		if strings.Join(got, ",") != want {
			t.Errorf("%q: got %v want %s", spec, got, want)
		}
	}
	for _, bad := range []string{"nope", "all,-nope", "-nope"} {
		if _, err := r.Select(strings.Split(bad, ",")); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestSelectGroup checks that a group's --controllers value sees only that group's controllers.
func TestSelectGroup(t *testing.T) {
	r := &Registry{}
	nop := func(ctrl.Manager, Env) error { return nil }
	r.RegisterIn("ray", "raycluster", nop)
	r.RegisterIn("kube", "job", nop)
	r.RegisterIn("ray", "rayjob", nop)
	r.RegisterIn("kube", "gc", nop)
	if got := strings.Join(r.Group("kube"), ","); got != "job,gc" {
		t.Errorf("Group(kube) = %s", got)
	}
	if got, err := r.Select([]string{"all", "-rayjob"}, "ray"); err != nil || strings.Join(got, ",") != "raycluster" {
		t.Errorf("Select(all,-rayjob; ray) = %v, %v", got, err)
	}
	if _, err := r.Select([]string{"job"}, "ray"); err == nil || !strings.Contains(err.Error(), "known: raycluster, rayjob") {
		t.Errorf("Select(job; ray) = %v, want unknown controller, known: raycluster, rayjob", err)
	}
	if got := strings.Join(r.Names(), ","); got != "gc,job,raycluster,rayjob" {
		t.Errorf("Names() = %s", got)
	}
}

func TestRegisterRejectsDuplicatesAndReservedNames(t *testing.T) {
	for _, name := range []string{"raycluster", "all", "none", "-x", ""} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Register(%q) did not panic", name)
				}
			}()
			registry("raycluster").Register(name, func(ctrl.Manager, Env) error { return nil })
		}()
	}
}

func TestCacheOptions(t *testing.T) {
	co, err := cacheOptions(Options{WatchNamespaces: []string{"a", "b"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(co.DefaultNamespaces) != 2 || co.ByObject != nil {
		t.Errorf("defaults: %+v", co)
	}
	// Cached objects come without managedFields, and with everything else.
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: map[string]string{"a": "b"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}}}
	out, err := co.DefaultTransform(pod)
	if p := out.(*corev1.Pod); err != nil || p.ManagedFields != nil || p.Name != "p" || p.Labels["a"] != "b" {
		t.Errorf("cache transform: %v, %+v", err, out)
	}

	co, err = cacheOptions(Options{PodSelector: RayPodSelector, JobSelector: KubeRayJobSelector})
	if err != nil {
		t.Fatal(err)
	}
	sel := func(kind client.Object) labels.Selector {
		for obj, b := range co.ByObject {
			if reflect.TypeOf(obj) == reflect.TypeOf(kind) {
				return b.Label
			}
		}
		return nil
	}
	if s := sel(&corev1.Pod{}); s == nil || !s.Matches(labels.Set{"ray.io/node-type": "worker"}) || s.Matches(labels.Set{"job-name": "x"}) {
		t.Errorf("pod selector %v", s)
	}
	if s := sel(&batchv1.Job{}); s == nil || !s.Matches(labels.Set{"app.kubernetes.io/created-by": "kuberay-operator"}) {
		t.Errorf("job selector %v", s)
	}

	// An explicit CacheByObject entry replaces the selector option for its kind.
	co, err = cacheOptions(Options{PodSelector: RayPodSelector, CacheByObject: map[client.Object]cache.ByObject{&corev1.Pod{}: {Label: labels.Everything()}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(co.ByObject) != 1 {
		t.Errorf("two entries for Pods: %v", co.ByObject)
	}
	if _, err := cacheOptions(Options{PodSelector: "in ("}); err == nil {
		t.Error("a bad selector was accepted")
	}
}
