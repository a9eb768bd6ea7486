package serviceaccount_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	satoken "github.com/rayctl/rayctl/pkg/apiserver/auth/serviceaccount"
)

// objects is a fixed store of ServiceAccounts and Pods.
type objects struct {
	accounts map[string]*corev1.ServiceAccount
	pods     map[string]*corev1.Pod
}

func (o objects) ServiceAccount(_ context.Context, ns, name string) (*corev1.ServiceAccount, error) {
	if sa, ok := o.accounts[ns+"/"+name]; ok {
		return sa, nil
	}
	return nil, apierrors.NewNotFound(corev1.Resource("serviceaccounts"), name)
}

func (o objects) Pod(_ context.Context, ns, name string) (*corev1.Pod, error) {
	if p, ok := o.pods[ns+"/"+name]; ok {
		return p, nil
	}
	return nil, apierrors.NewNotFound(corev1.Resource("pods"), name)
}

func TestTokens(t *testing.T) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	otherKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	now := time.Now()
	clock := func() time.Time { return now }
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "robot", UID: "sa-1"}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "pod-1"}, Spec: corev1.PodSpec{ServiceAccountName: "robot", NodeName: "n"}}
	store := objects{accounts: map[string]*corev1.ServiceAccount{"ns/robot": sa}, pods: map[string]*corev1.Pod{"ns/p": pod}}
	issuer := &satoken.Issuer{Key: key, Now: clock}
	authn := &satoken.Authenticator{Key: &key.PublicKey, Objects: store, Now: clock}

	issue := func(r satoken.Request) string {
		t.Helper()
		if r.Lifetime == 0 {
			r.Lifetime = time.Hour
		}
		tok, _, err := issuer.Issue(r)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}

	t.Run("a pod-bound token names the account, its groups and the pod", func(t *testing.T) {
		resp, ok, err := authn.AuthenticateToken(context.Background(), issue(satoken.Request{ServiceAccount: sa, Pod: pod}))
		if !ok || err != nil {
			t.Fatalf("ok %v, err %v", ok, err)
		}
		u := resp.User
		if u.GetName() != "system:serviceaccount:ns:robot" || u.GetUID() != "sa-1" {
			t.Errorf("user %q uid %q", u.GetName(), u.GetUID())
		}
		if !slices.Equal(u.GetGroups(), []string{"system:serviceaccounts", "system:serviceaccounts:ns"}) {
			t.Errorf("groups %v", u.GetGroups())
		}
		if got := u.GetExtra()["authentication.kubernetes.io/pod-name"]; !slices.Equal(got, []string{"p"}) {
			t.Errorf("pod-name extra %v", got)
		}
		if !slices.Equal(resp.Audiences, []string{satoken.DefaultIssuer}) {
			t.Errorf("audiences %v", resp.Audiences)
		}
	})

	for _, tc := range []struct {
		name   string
		token  func() string
		authn  *satoken.Authenticator
		errHas string // "" means: not ours, no error
	}{
		{"garbage", func() string { return "not-a-jwt" }, authn, ""},
		{"signed by another key", func() string {
			tok, _, _ := (&satoken.Issuer{Key: otherKey, Now: clock}).Issue(satoken.Request{ServiceAccount: sa, Lifetime: time.Hour})
			return tok
		}, authn, ""},
		{"another issuer", func() string {
			tok, _, _ := (&satoken.Issuer{Key: key, Name: "https://elsewhere", Now: clock}).Issue(satoken.Request{ServiceAccount: sa, Lifetime: time.Hour})
			return tok
		}, authn, ""},
		{"expired", func() string {
			tok, _, _ := (&satoken.Issuer{Key: key, Now: func() time.Time { return now.Add(-3 * time.Hour) }}).Issue(satoken.Request{ServiceAccount: sa, Lifetime: time.Hour})
			return tok
		}, authn, "expired"},
		{"another audience", func() string { return issue(satoken.Request{ServiceAccount: sa, Audiences: []string{"vault"}}) }, authn, "aud"},
		{"account deleted", func() string {
			gone := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "gone", UID: "x"}}
			return issue(satoken.Request{ServiceAccount: gone})
		}, authn, "no longer exists"},
		{"account made anew", func() string {
			old := sa.DeepCopy()
			old.UID = types.UID("sa-0")
			return issue(satoken.Request{ServiceAccount: old})
		}, authn, "made anew"},
		{"pod deleted", func() string {
			gone := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "gone", UID: "y"}}
			return issue(satoken.Request{ServiceAccount: sa, Pod: gone})
		}, authn, "no longer exists"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, ok, err := tc.authn.AuthenticateToken(context.Background(), tc.token())
			if ok || resp != nil {
				t.Fatalf("accepted: %+v", resp)
			}
			switch {
			case tc.errHas == "" && err != nil:
				t.Errorf("want no opinion, got %v", err)
			case tc.errHas != "" && (err == nil || !strings.Contains(err.Error(), tc.errHas)):
				t.Errorf("want an error with %q, got %v", tc.errHas, err)
			}
		})
	}
}
