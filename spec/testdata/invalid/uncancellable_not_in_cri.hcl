# Invalid: an uncancellable call the action does not make.
machine "m" {
  initial = state.a
  event "go" {}
  action "act" {
    cri           = ["CreateContainer", "StartContainer"]
    uncancellable = { StartContianer = "a start cancelled at the client may still start the task" }
  }
  state "a" {
    transition "go" {
      to      = state.b
      actions = [action.act]
    }
  }
  state "b" { final = true }
}
