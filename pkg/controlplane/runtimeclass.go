package controlplane

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/rayctl/rayctl/pkg/runtime/selector"
)

// managedBy labels the RuntimeClasses rayctl makes, so that it removes those of a runtime no longer in use.
const managedBy = "app.kubernetes.io/managed-by"

// runtimeHandlers are the runtime handlers the node serves, each named by a RuntimeClass of the same name:
// both runtimes when each pod runs on one of them (selector.PerPod), else the one runtime (none for fake).
func runtimeHandlers(runtimeName string) []string {
	switch runtimeName {
	case selector.PerPod:
		return []string{selector.Containerd, selector.Process}
	case selector.Containerd, selector.Process:
		return []string{runtimeName}
	}
	return nil
}

// publishRuntimeClasses makes a RuntimeClass for each of the node's runtime handlers, named after it
// (`runtimeClassName: containerd`), as a cluster's administrator makes one per CRI handler, and removes
// the ones it made earlier for a runtime no longer in use. Classes made by others stay as they are.
func publishRuntimeClasses(ctx context.Context, client kubernetes.Interface, runtimeName string) ([]string, error) {
	want := runtimeHandlers(runtimeName)
	api := client.NodeV1().RuntimeClasses()
	var errs []error
	for _, h := range want {
		rc := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: h, Labels: map[string]string{managedBy: "rayctl"}}, Handler: h}
		if _, err := api.Create(ctx, rc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			errs = append(errs, fmt.Errorf("RuntimeClass %s: %w", h, err))
		}
	}
	old, err := api.List(ctx, metav1.ListOptions{LabelSelector: managedBy + "=rayctl"})
	if err != nil {
		return want, errors.Join(append(errs, err)...)
	}
	for _, rc := range old.Items {
		if !slices.Contains(want, rc.Name) {
			if err := api.Delete(ctx, rc.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("RuntimeClass %s: %w", rc.Name, err))
			}
		}
	}
	return want, errors.Join(errs...)
}

// runtimeClassLine ends the runtime step's line: the RuntimeClasses pods may name.
func runtimeClassLine(handlers []string) string {
	if len(handlers) == 0 {
		return ""
	}
	return "; RuntimeClasses: " + strings.Join(handlers, ", ")
}
