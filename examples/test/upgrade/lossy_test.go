/*
Copyright 2026 The Graduator Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package upgrade

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/graduator/graduator/graduationtest"

	v1 "github.com/graduator/graduator/examples/api/v1"
)

// lossyPath serves the conversion of a release with a bug: its v1 -> v2
// conversion forgets spec.author (as a ConvertTo that copies authors only
// from the stash annotation would). Every book stored as v1 would lose its
// author in the migration; the rehearsal refuses before the first write.
const lossyPath = "/convert-lossy"

func TestALossyConversionIsRefusedBeforeTheFirstWrite(t *testing.T) {
	ctx := t.Context()
	deleteBooks(t)
	t.Cleanup(func() { deleteBooks(t) })
	r := graduationtest.New(t, env, graduationtest.Options{Scheme: scheme})

	r.Install(ctx, stage(t, "1-v1.yaml")...)
	for i, title := range []string{"Dune", "Solaris", "Roadside Picnic"} {
		r.Create(ctx, &v1.Book{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "lossy-" + string(rune('a'+i))},
			Spec:       v1.BookSpec{Title: title, Author: "Someone"},
		})
	}
	r.Install(ctx, stageConvertingAt(t, "2-add-v2.yaml", lossyPath)...)

	_, err := r.TryGraduate(ctx, crdName, "v2")
	// Every book is proven, and each of the three loses its author.
	const sentence = "v1 -> v2 -> v1 loses /spec/author on 3 of 3 Books"
	if err == nil || !strings.Contains(err.Error(), sentence) {
		t.Fatalf("the lossy conversion was not refused with %q: %v", sentence, err)
	}
	t.Log(err)
	stored := r.Stored(ctx, crdName)
	if n := stored.Count("bookstore.example.com/v1"); n != 3 {
		t.Fatalf("etcd holds %s, want the 3 books still stored as v1", stored)
	}
	var book v1.Book
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "lossy-a"}, &book); err != nil {
		t.Fatal(err)
	}
	if book.Spec.Author != "Someone" {
		t.Fatalf("book lossy-a read at v1 has author %q after the refused graduation", book.Spec.Author)
	}
}

// lossyConversion answers ConversionReviews for Books: v1 -> v2 without
// the author (the bug), v2 -> v1 with the first author.
type lossyConversion struct{}

func (lossyConversion) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	var review apiextensionsv1.ConversionReview
	if err := json.NewDecoder(req.Body).Decode(&review); err != nil || review.Request == nil {
		http.Error(w, "not a ConversionReview", http.StatusBadRequest)
		return
	}
	resp := &apiextensionsv1.ConversionResponse{UID: review.Request.UID,
		Result: metav1.Status{Status: metav1.StatusSuccess}}
	for _, raw := range review.Request.Objects {
		var obj map[string]any
		if err := json.Unmarshal(raw.Raw, &obj); err != nil {
			resp.Result = metav1.Status{Status: metav1.StatusFailure, Message: err.Error()}
			break
		}
		spec, _ := obj["spec"].(map[string]any)
		obj["apiVersion"] = review.Request.DesiredAPIVersion
		if spec != nil {
			switch review.Request.DesiredAPIVersion {
			case "bookstore.example.com/v2":
				delete(spec, "author") // the bug: authors is never set
			case "bookstore.example.com/v1":
				if authors, _ := spec["authors"].([]any); len(authors) > 0 {
					spec["author"] = authors[0]
				}
				delete(spec, "authors")
				delete(spec, "isbn")
			}
		}
		out, _ := json.Marshal(obj)
		resp.ConvertedObjects = append(resp.ConvertedObjects, runtime.RawExtension{Raw: out})
	}
	review.Response, review.Request = resp, nil
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(&review)
}

// deleteBooks deletes the Book CRD, if any, and waits until it is gone, so
// that each test starts from release 1.
func deleteBooks(t *testing.T) {
	t.Helper()
	c, err := client.New(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: crdName}}
	if err := c.Delete(context.Background(), crd); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 2*time.Minute, true,
		func(ctx context.Context) (bool, error) {
			err := c.Get(ctx, client.ObjectKeyFromObject(crd), crd)
			return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
		})
	if err != nil {
		t.Fatalf("delete the CRD %s: %v", crdName, err)
	}
}
