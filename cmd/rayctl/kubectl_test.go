package main

import (
	"testing"

	"github.com/rayctl/rayctl/pkg/kubectli18n"
)

// Among all the packages rayctl links, kubectli18n still initializes before any translates a message:
// rayctl's start does not load kubectl's catalog for a language it does not translate.
func TestKubectlCatalogLoaderHookedFirst(t *testing.T) {
	if !kubectli18n.Hooked {
		t.Fatal("a package translated a kubectl message before kubectli18n initialized: kubectl's catalog is loaded at every start")
	}
}
