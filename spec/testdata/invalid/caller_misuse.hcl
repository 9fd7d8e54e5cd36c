# Invalid: a caller with a machine's name, a duplicate handler and an
# unknown CRI call.
machine "m" {
  initial = state.a
  event "go" {}
  state "a" {
    transition "go" { to = state.b }
  }
  state "b" { final = true }
}

caller "m" {
  handler "look" { cri = ["ListContainers"] }
}

caller "api" {
  handler "exec" { cri = ["ListContainers", "Exce"] }
  handler "exec" { cri = ["Exec"] }
}
