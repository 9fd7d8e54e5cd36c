# One device plugin's endpoint (kubelet pkg/kubelet/cm/devicemanager:
# manager.go's PluginConnected, PluginDisconnected,
# genericDeviceUpdateCallback and GetCapacity; endpoint.go's stop time and
# endpointStopGracePeriod), one machine per resource name, owned by
# engine/devicemanager's Manager.
#
# The machine is made when a plugin of a new resource registers, or at the
# start for each resource the checkpoint lists (restored in gone, kubelet's
# newStoppedEndpointImpl: its capacity stays until its plugin registers
# again or the grace ends). Its events come from the plugin: the
# Registration service's Register (registered, once the request passed
# validation and the plugin's socket answered GetDevicePluginOptions), the
# endpoint's ListAndWatch stream (devices, each list it sends), and that
# stream's end (stream_ended). The manager fires them one at a time, under
# its lock, so a machine's steps never overlap. No input of routes.hcl
# reaches this machine and nothing of a pod waits for it: `speclet spec
# verify` explores it apart from the pod's machines, its events as
# externals of system.hcl.
#
# Rules that are not transitions, and where the manager enforces them
# (engine/devicemanager):
#  - A registration refused before the dial (an API version kubelet does
#    not support, a resource name that is no extended resource name, an
#    endpoint that is no socket name in the directory, more than
#    MaxResources resources, more than MaxRegistrations at once) or whose
#    dial or GetDevicePluginOptions failed is the Register call's error
#    only: no event, the resource's endpoint (if any) keeps running.
#  - Events of an endpoint that is no longer the resource's (one replaced
#    by a registration since) are dropped: the stream of a replaced
#    endpoint ends when connect_endpoint closes it, and that end is not the
#    resource's (kubelet's PluginDisconnected would mark the new endpoint's
#    devices unhealthy there; speclet does not).
#  - The grace timer is found when the Node's capacity is read (Capacity,
#    at every node status update), as kubelet's GetCapacity finds the
#    endpoints whose grace expired: grace_over fires then, at the first
#    read after the duration.
#  - Allocation is not a row of this machine: what a pod's containers hold
#    is data (pod, container, resource: devices and the plugin's answer),
#    decided once at admission per container, and concurrent with the
#    plugin's stream. It reads what this machine's actions recorded: only
#    healthy devices no other container holds are given, a resource that is
#    not registered ("cannot allocate unregistered device") or has no
#    healthy device ("no healthy devices present") refuses the pod, and a
#    gone endpoint's Allocate fails ("endpoint ... has been stopped").
machine "device_plugin" {
  doc     = "One resource's device plugin endpoint: registered, its devices healthy or not, gone when its stream ended (capacity kept, allocatable 0) and removed from the Node's status after the grace period."
  initial = state.absent

  event "registered" { doc = "A Register request of this resource passed validation and its plugin answered at its endpoint (dialled, GetDevicePluginOptions): the new endpoint replaces any earlier one." }
  event "devices" { doc = "The resource's endpoint's ListAndWatch sent a device list (every device and its health)." }
  event "stream_ended" { doc = "The resource's endpoint's ListAndWatch stream ended: the plugin died, closed it, or its connection broke." }
  event "grace_over" { doc = "The timer of gone: the grace period passed since the stream ended (or since the start, for a resource of the checkpoint) without a new registration." }

  guard "any_healthy" { doc = "The device list the step delivers has a device whose health is Healthy." }

  action "connect_endpoint" {
    doc = "Close the resource's earlier endpoint, if any, install the new one with its options and start reading its ListAndWatch stream; the resource shows in the Node's capacity (its earlier devices until the first list)."
  }
  action "record_devices" {
    doc = "Record the list (kubelet's genericDeviceUpdateCallback): every device in capacity, the healthy ones in allocatable; write the checkpoint and tell the node status."
  }
  action "mark_unhealthy" {
    doc = "Note when the stream ended and make every device unhealthy (kubelet's markResourceUnhealthy and setStopTime): allocatable 0, capacity kept; write the checkpoint and tell the node status."
  }
  action "remove_resource" {
    doc = "Forget the resource's endpoint and devices: it shows as 0 in the Node's capacity and allocatable (kubelet's deleted resources); write the checkpoint."
  }

  duration "endpoint_grace" {
    doc     = "How long a gone endpoint's resource keeps its capacity (kubelet's endpointStopGracePeriod, EndpointGracePeriod), from when its stream ended."
    default = "5m"
  }

  shared "connected" {
    doc = "An endpoint is connected and its stream runs (registered, healthy, unhealthy)."
    transition "devices" {
      guard   = guard.any_healthy
      to      = state.healthy
      actions = [action.record_devices]
    }
    transition "devices" {
      to      = state.unhealthy
      actions = [action.record_devices]
    }
    transition "stream_ended" {
      to      = state.gone
      actions = [action.mark_unhealthy]
    }
  }

  shared "register" {
    doc = "A registration replaces whatever the resource had (every state)."
    transition "registered" {
      to      = state.registered
      actions = [action.connect_endpoint]
    }
  }

  state "absent" {
    doc = "No plugin of the resource registered since the start, and the checkpoint does not list it."
    use "register" {}
  }

  state "registered" {
    doc = "The endpoint is connected; its first device list has not come yet."
    use "connected" {}
    use "register" {}
  }

  state "healthy" {
    doc = "The endpoint's last list has a healthy device: allocatable > 0."
    use "connected" {}
    use "register" {}
  }

  state "unhealthy" {
    doc = "The endpoint's last list has no healthy device (none at all, or every one unhealthy): allocatable 0."
    use "connected" {}
    use "register" {}
  }

  state "gone" {
    doc = "The endpoint's stream ended (or the resource is the checkpoint's and no plugin registered since the start): every device unhealthy, capacity kept, allocatable 0; Allocate on it fails."
    timeout "grace_over" { after = duration.endpoint_grace }
    transition "grace_over" {
      to      = state.removed
      actions = [action.remove_resource]
    }
    use "register" {}
  }

  state "removed" {
    doc = "Past the grace period: the resource is 0 in the Node's capacity and allocatable until a plugin registers it again."
    use "register" {}
  }
}
