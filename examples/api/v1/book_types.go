package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BookSpec is a book in v1: one author, no ISBN.
type BookSpec struct {
	Title  string `json:"title"`
	Author string `json:"author,omitempty"`
}

// +kubebuilder:object:root=true

// Book is a book of the store.
type Book struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec BookSpec `json:"spec,omitempty"`
}

// +kubebuilder:object:root=true

// BookList contains a list of Book.
type BookList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Book `json:"items"`
}
