package receiver_test

import (
	"fmt"

	"github.com/configbutler/gitops-reverser/receiver"
)

func ExampleSameRepository() {
	const repoURL = "https://github.com/org/repo.git"
	for _, ref := range []string{
		"git@github.com:org/repo.git",
		"https://GitHub.com/org/repo/",
		"org/repo",
		"https://github.com/org/repo-evil",
	} {
		fmt.Println(ref, receiver.SameRepository(ref, repoURL))
	}
	// Output:
	// git@github.com:org/repo.git true
	// https://GitHub.com/org/repo/ true
	// org/repo true
	// https://github.com/org/repo-evil false
}

func ExampleWebhookPath() {
	fmt.Println(receiver.WebhookPath([]byte("token"), "github", "flux-system"))
	// Output: /hook/cadd925a28ae26d23b3f54fc3fa800dbdadb9da71a9380cf4fd051163a050cb3
}
