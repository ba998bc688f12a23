package main

import (
	"context"
	"errors"
	"io"
)

func runBuild(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return errors.New("not yet")
}

func runPublish(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return errors.New("not yet")
}

func runKeygen(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return errors.New("not yet")
}
