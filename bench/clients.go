package main

import (
	"context"
	"fmt"
	"time"

	rayclient "github.com/ray-project/kuberay/ray-operator/pkg/client/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/rayctl/rayctl/pkg/instance"
)

// clients are the admin's Kubernetes and ray.io clients of up, limited to qps (burst).
func clients(up *instance.Process, qps float32, burst int) (kubernetes.Interface, rayclient.Interface, error) {
	cfg, err := up.RESTConfig(qps, burst)
	if err != nil {
		return nil, nil, err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	ray, err := rayclient.NewForConfig(cfg)
	return kube, ray, err
}

// podNamespace creates namespace ns and waits for its default service account, which a controller
// adds shortly after and which pods need.
func podNamespace(ctx context.Context, kube kubernetes.Interface, ns string) error {
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	if err := poll(ctx, time.Minute, func() bool {
		_, err := kube.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil
	}); err != nil {
		return fmt.Errorf("no default service account in %s: %w", ns, err)
	}
	return nil
}
