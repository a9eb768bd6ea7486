package ui

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/yaml"

	"github.com/rayctl/rayctl/configs"
	"github.com/rayctl/rayctl/pkg/diagnose"
)

// DemoSample is the RayJob the page's demo button applies: the one `rayctl demo` applies.
const DemoSample = "samples/rayjob-http.yaml"

// diagnoseEvery is the least time between two diagnoses of one stream.
const diagnoseEvery = time.Second

// serveDiagnose streams `rayctl diagnose`'s report on one object: one now, and a new one after the
// namespace's chain moves (at most one a second), when it differs.
func (s *Server) serveDiagnose(w http.ResponseWriter, r *http.Request) {
	clients := diagnose.Clients{Kube: s.kube, Ray: s.ray, Chain: s.chain.diagnoseReader()}
	s.stream(w, r, "diagnosis", diagnoseEvery, func(kind, ns, name string) any {
		in, err := diagnose.Gather(r.Context(), clients, kind, ns, name)
		if err != nil {
			return map[string]string{"error": err.Error()}
		}
		return diagnose.Run(in)
	})
}

// serveDemo applies the demo RayJob under a new name in the demo namespace and answers its name.
func (s *Server) serveDemo(w http.ResponseWriter, r *http.Request) {
	job, err := demoJob()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	ns := s.opts.DemoNamespace
	if err := s.ensureNamespace(r.Context(), ns); err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	created, err := s.ray.RayV1().RayJobs(ns).Create(r.Context(), job, metav1.CreateOptions{})
	if err != nil {
		code := http.StatusBadGateway
		if st, ok := err.(apierrors.APIStatus); ok && st.Status().Code >= 400 {
			code = int(st.Status().Code)
		}
		http.Error(w, fmt.Sprintf("creating RayJob %s/%s: %v", ns, job.Name, err), code)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(ObjectView{Kind: "RayJob", Namespace: created.Namespace, Name: created.Name, Created: created.CreationTimestamp.Time})
}

// demoJob is the embedded demo RayJob under a name of its own.
func demoJob() (*rayv1.RayJob, error) {
	data, err := configs.Samples.ReadFile(DemoSample)
	if err != nil {
		return nil, err
	}
	job := &rayv1.RayJob{}
	if err := yaml.Unmarshal(data, job); err != nil {
		return nil, fmt.Errorf("%s: %w", DemoSample, err)
	}
	job.ObjectMeta = metav1.ObjectMeta{Name: job.Name + "-" + utilrand.String(5), Labels: job.Labels, Annotations: job.Annotations}
	return job, nil
}

// ensureNamespace creates ns if it is missing and waits (a minute at most) for the default service
// account its Pods need: a watch without a resourceVersion begins with what exists.
func (s *Server) ensureNamespace(ctx context.Context, ns string) error {
	_, err := s.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", ns, err)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	w, err := s.kube.CoreV1().ServiceAccounts(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=default"})
	if err != nil {
		return err
	}
	defer w.Stop()
	for ev := range w.ResultChan() {
		if ev.Type == watch.Added {
			return nil
		}
	}
	return fmt.Errorf("namespace %s got no default service account within a minute", ns)
}
