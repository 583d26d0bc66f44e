// Package v2 is the second version of the Book API of the bookstore example:
// the hub of the conversion, and the storage version once graduated.
// +kubebuilder:object:generate=true
// +groupName=bookstore.example.com
package v2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is group version used to register these objects.
	GroupVersion = schema.GroupVersion{Group: "bookstore.example.com", Version: "v2"}
	// SchemeBuilder registers this version's types.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds the types in this group-version to the given scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &Book{}, &BookList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
