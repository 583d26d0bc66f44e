package v2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BookSpec is a book in v2: any number of authors, and an ISBN.
type BookSpec struct {
	Title   string   `json:"title"`
	Authors []string `json:"authors,omitempty"`
	ISBN    string   `json:"isbn,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:storageversion

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

// Hub marks v2 as the hub of the conversion: every other version converts
// to and from it.
func (*Book) Hub() {}
