# Invalid: uncancellable written as a list.
machine "m" {
  initial = state.a
  event "go" {}
  action "act" {
    cri           = ["StartContainer"]
    uncancellable = ["StartContainer"]
  }
  state "a" {
    transition "go" {
      to      = state.b
      actions = [action.act]
    }
  }
  state "b" { final = true }
}
