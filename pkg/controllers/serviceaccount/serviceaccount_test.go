package serviceaccount_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/rayctl/rayctl/pkg/controllers/serviceaccount"
	"github.com/rayctl/rayctl/test/e2e/framework"
)

var in *framework.Instance

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	ctrl.SetLogger(logr.Discard())
	var err error
	if in, err = framework.Start("", framework.ControlPlaneOnly()...); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(in.DataDir)
	defer in.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- serviceaccount.Run(ctx, in.Config) }()
	code := m.Run()
	cancel()
	if err := <-done; err != nil {
		fmt.Fprintln(os.Stderr, "controller:", err)
		return 1
	}
	return code
}

func TestDefaultServiceAccount(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	c := in.Client
	ns, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "sa-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var first *corev1.ServiceAccount
	waitFor(t, ctx, "the default ServiceAccount of a new namespace", func() (bool, error) {
		first, err = c.CoreV1().ServiceAccounts(ns.Name).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, ignoreNotFound(err)
	})

	if err := c.CoreV1().ServiceAccounts(ns.Name).Delete(ctx, "default", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the default ServiceAccount to come back after deletion", func() (bool, error) {
		sa, err := c.CoreV1().ServiceAccounts(ns.Name).Get(ctx, "default", metav1.GetOptions{})
		return err == nil && sa.UID != first.UID, ignoreNotFound(err)
	})

	// Other ServiceAccounts are left alone.
	if _, err := c.CoreV1().ServiceAccounts(ns.Name).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "mine"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.CoreV1().ServiceAccounts(ns.Name).Delete(ctx, "mine", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	if _, err := c.CoreV1().ServiceAccounts(ns.Name).Get(ctx, "mine", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("ServiceAccount mine after deletion: got %v, want NotFound", err)
	}
}

func TestSystemNamespacesHaveOne(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for _, ns := range []string{"default", "kube-system", "kube-public"} {
		waitFor(t, ctx, "the default ServiceAccount of "+ns, func() (bool, error) {
			_, err := in.Client.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
			return err == nil, ignoreNotFound(err)
		})
	}
}

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func waitFor(t *testing.T, ctx context.Context, what string, cond func() (bool, error)) {
	t.Helper()
	var last error
	err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(context.Context) (bool, error) {
		ok, err := cond()
		if err != nil {
			last = err
		}
		return ok, nil
	})
	if err != nil {
		t.Fatalf("%s: not in time (last error: %v)", what, last)
	}
}
