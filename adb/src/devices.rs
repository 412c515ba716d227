//! host:devices-l, parsed. A line is the serial, the state (which may hold
//! spaces: "no permissions (...)"), then `key:value` words.

/// A device's state as the server reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeviceState {
    /// Online: services reach it.
    Device,
    Offline,
    /// Its owner has not accepted this host's key yet.
    Unauthorized,
    Authorizing,
    Connecting,
    /// Any other state, in the server's words (bootloader, recovery,
    /// sideload, "no permissions ...").
    Other(String),
}

impl DeviceState {
    fn parse(s: &str) -> DeviceState {
        match s {
            "device" => DeviceState::Device,
            "offline" => DeviceState::Offline,
            "unauthorized" => DeviceState::Unauthorized,
            "authorizing" => DeviceState::Authorizing,
            "connecting" => DeviceState::Connecting,
            other => DeviceState::Other(other.to_string()),
        }
    }
}

/// One line of host:devices-l. The serial of a device reached over TCP is
/// its endpoint (`host:port`), which may be a vendor's secret: never put
/// it in a message, and name the device by `transport_id`.
#[derive(Clone, PartialEq, Eq)]
pub struct DeviceInfo {
    pub serial: String,
    pub state: DeviceState,
    pub product: Option<String>,
    pub model: Option<String>,
    pub device: Option<String>,
    pub transport_id: Option<u64>,
}

/// The serial stays out of the debug form, which ends up in logs.
impl std::fmt::Debug for DeviceInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceInfo")
            .field("serial", &"(hidden)")
            .field("state", &self.state)
            .field("product", &self.product)
            .field("model", &self.model)
            .field("device", &self.device)
            .field("transport_id", &self.transport_id)
            .finish()
    }
}

const KEYS: &[&str] = &[
    "usb:",
    "product:",
    "model:",
    "device:",
    "transport_id:",
    "features:",
];

/// Parse host:devices-l's text. Lines that are not a device (blank, or
/// with no state) are left out.
pub fn parse_devices(text: &str) -> Vec<DeviceInfo> {
    text.lines().filter_map(parse_line).collect()
}

fn parse_line(line: &str) -> Option<DeviceInfo> {
    let mut words = line.split_whitespace();
    let serial = words.next()?.to_string();
    let mut state = Vec::new();
    let mut info = DeviceInfo {
        serial,
        state: DeviceState::Other(String::new()),
        product: None,
        model: None,
        device: None,
        transport_id: None,
    };
    let mut in_state = true;
    for w in words {
        let key = KEYS.iter().find(|k| w.starts_with(**k));
        match key {
            None if in_state => state.push(w),
            None => {}
            Some(k) => {
                in_state = false;
                let v = w[k.len()..].to_string();
                match *k {
                    "product:" => info.product = Some(v),
                    "model:" => info.model = Some(v),
                    "device:" => info.device = Some(v),
                    "transport_id:" => info.transport_id = v.parse().ok(),
                    _ => {}
                }
            }
        }
    }
    if state.is_empty() {
        return None;
    }
    info.state = DeviceState::parse(&state.join(" "));
    Some(info)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_of_devices_l_parse_as_adb_prints_them() {
        // The formats of adb 29's `adb devices -l`: an emulator, a TCP
        // device, a USB device with no permission (a state with spaces),
        // and an unauthorized one (no product words at all).
        let text = "emulator-5554          device product:sdk_gphone64_x86_64 model:sdk_gphone64_x86_64 device:emu64xa transport_id:1\n\
127.0.0.1:40111        device product:fixture model:Fixture_Phone device:fixture transport_id:7\n\
0123456789ABCDEF       no permissions (user in plugdev group; are your udev rules wrong?); see [http://developer.android.com/tools/device.html] usb:1-1 transport_id:3\n\
R58M123                unauthorized usb:2-1 transport_id:4\n\n";
        let d = parse_devices(text);
        assert_eq!(d.len(), 4);
        assert_eq!(
            d[1],
            DeviceInfo {
                serial: "127.0.0.1:40111".into(),
                state: DeviceState::Device,
                product: Some("fixture".into()),
                model: Some("Fixture_Phone".into()),
                device: Some("fixture".into()),
                transport_id: Some(7),
            }
        );
        assert_eq!(d[0].transport_id, Some(1));
        assert!(
            matches!(&d[2].state, DeviceState::Other(s) if s.starts_with("no permissions (user in plugdev group;"))
        );
        assert_eq!(d[2].transport_id, Some(3));
        assert_eq!(
            (d[3].state.clone(), d[3].model.clone()),
            (DeviceState::Unauthorized, None)
        );
        assert!(!format!("{:?}", d[1]).contains("40111"));
        assert!(parse_devices("").is_empty());
    }
}
