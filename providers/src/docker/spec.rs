//! What a spec may ask of the Docker provider, checked with no engine call
//! (and again against the host once it is read): the image, the user, the
//! sizes, the labels, the shares and the network.

use computerd::protocol::SettingKind;

use super::{DEFAULT_USER, DockerProvider, Host, ImageSource, desktop, egress, plan};
use crate::provider::Provider;
use crate::sizing::{self, Limits};
use crate::types::{ComputerSpec, ProviderError, Result, check_labels, check_lifetime, label};

impl DockerProvider {
    /// The user a spec's computer runs as.
    pub(super) fn user_for(&self, spec: &ComputerSpec) -> Result<(u32, u32)> {
        if let Some(u) = &spec.user {
            return plan::parse_user("user", u);
        }
        if let Some(u) = self.opts.user {
            return Ok(u);
        }
        let (u, g) = (
            nix::unistd::getuid().as_raw(),
            nix::unistd::getgid().as_raw(),
        );
        Ok(if u == 0 || g == 0 {
            DEFAULT_USER
        } else {
            (u, g)
        })
    }

    pub(super) fn image_of(&self, spec: &ComputerSpec) -> Result<ImageSource> {
        match (&spec.image, &self.opts.image) {
            (Some(i), _) => Ok(ImageSource::Name(i.clone())),
            (None, Some(s)) => Ok(s.clone()),
            (None, None) => Err(ProviderError::invalid(
                "image",
                "no image: name one in the spec, or give the provider one (--docker-image NAME or --docker-recipe DOCKERFILE)",
            )),
        }
    }

    /// Sizes, checked as the local provider checks them (one rule).
    pub(super) fn limits_for(&self, spec: &ComputerSpec, host: Option<&Host>) -> Result<Limits> {
        if spec.sizes.disk_mb.is_some() {
            return Err(ProviderError::unsupported(
                "Docker bounds no disk: a computer's /work is half of its memory; leave diskMb out",
            )
            .with_field("diskMb"));
        }
        let size = match host {
            Some(h) => h.size,
            None => sizing::Host::read()?,
        };
        Limits::from_sizes(&spec.sizes, &size)
    }

    /// Whether its computers run the image's Chromium: a browser always, a
    /// desktop when told its image has one.
    pub(super) fn runs_chromium(&self) -> bool {
        self.opts.browser || (self.opts.desktop.is_some() && self.opts.desktop_browser)
    }

    /// The setting kind this provider's computers are.
    pub(super) fn made_kind(&self) -> SettingKind {
        match (self.opts.desktop, self.opts.browser) {
            (Some(_), _) => SettingKind::Desktop,
            (None, true) => SettingKind::Browser,
            (None, false) => SettingKind::Sandbox,
        }
    }

    pub(super) fn check_spec(&self, spec: &ComputerSpec, host: Option<&Host>) -> Result<()> {
        let caps = self.capabilities();
        check_lifetime(spec.lifetime_ms, &caps)?;
        check_labels(&spec.labels)?;
        for (k, v) in &spec.labels {
            if k == label::COMPUTER
                || k == label::DEADLINE
                || k == egress::LABEL
                || k == egress::LIST_LABEL
            {
                return Err(ProviderError::invalid(
                    "labels",
                    format!("the label {k} is the provider's own; leave it out"),
                ));
            }
            if v.contains('\0') {
                return Err(ProviderError::invalid(
                    "labels",
                    format!("label {k} holds a NUL byte"),
                ));
            }
        }
        desktop::check_kind(spec.kind, self.made_kind())?;
        self.image_of(spec)?.check()?;
        let allow = egress::list_of(&spec.network)?.is_some();
        if allow
            && let Some(u) = &spec.user
            && plan::parse_user("user", u)?.0 == egress::UID
        {
            return Err(ProviderError::invalid(
                "user",
                format!(
                    "uid {} is the egress proxy's own: an allowlisted computer runs as another",
                    egress::UID
                ),
            ));
        }
        if spec.mount.is_some() {
            return Err(ProviderError::unsupported(
                "the Docker provider takes host directories as shares (at /workspace), not as mount; use share",
            )
            .with_field("mount"));
        }
        if let Some(u) = &spec.user {
            plan::parse_user("user", u)?;
        }
        self.limits_for(spec, host)?;
        crate::share::check(&spec.shares, &self.opts.cache_dir)?;
        for s in &spec.shares {
            let p = s.source.to_string_lossy();
            if p.contains([',', '"', '\n', '\r']) {
                return Err(ProviderError::invalid(
                    "share",
                    format!(
                        "the share {p:?} holds a comma, a quote or a line break, which a Docker mount cannot name"
                    ),
                ));
            }
        }
        if let Some(h) = host {
            h.require()?;
            if let (Some(remap), false) = (&h.remap, spec.shares.is_empty()) {
                return Err(ProviderError::unsupported(format!(
                    "this Docker host remaps user ids ({remap}), so a share's owner on the host is not the computer's user: leave share out, or use a Docker without remapping"
                ))
                .with_field("share"));
            }
            if let (Some(remap), true) = (&h.remap, allow) {
                return Err(ProviderError::unsupported(format!(
                    "this Docker host remaps user ids ({remap}), so the egress proxy's socket volume would be owned by host ids the computer's user does not map to: ask for network none or open, or use a Docker without remapping"
                ))
                .with_field("network"));
            }
        }
        Ok(())
    }
}
