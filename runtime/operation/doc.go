// Package operation holds the long-running operations of a scope: conversation
// deletion, retention, the operation records and their steps, and the maintenance
// status. Other areas run their own steps as operations through StepStore.
package operation
