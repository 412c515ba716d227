//! The image a computer starts from, made ready in this process: an image
//! by name is ready when Docker has it and pulled once when it has none; a
//! recipe (a Dockerfile with no build context) is built once per content
//! hash, tagged `computer-mcp:<first 12 hex digits>` and labelled with the
//! whole hash. Docker's own tag is the shared state: no state file.
//!
//! One flight per image: concurrent callers share the first caller's
//! inspect and pull or build, and ask Docker nothing themselves. A flight
//! is forgotten once it settles, so a failure is never kept.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use bollard::Docker;
use bollard::query_parameters::{BuildImageOptionsBuilder, CreateImageOptionsBuilder};
use futures::FutureExt;
use futures::StreamExt;
use futures::future::{BoxFuture, Shared};

use super::cache::sha256_bytes;
use super::host::{docker_error, is_not_found};
use crate::types::{ErrorCode, ProviderError, Result, label};

/// Where an image comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ImageSource {
    /// An image by name (`debian:bookworm`), pulled once when missing.
    Name(String),
    /// A Dockerfile's text, built once per content hash.
    Recipe(String),
}

impl ImageSource {
    /// The tag a computer's spec names.
    pub fn tag(&self) -> String {
        match self {
            ImageSource::Name(n) => n.clone(),
            ImageSource::Recipe(r) => recipe_tag(r),
        }
    }

    /// Refuse, before Docker is called, a name that is not one or a
    /// recipe with no FROM line.
    pub fn check(&self) -> Result<()> {
        match self {
            ImageSource::Name(n) => {
                let ok = !n.is_empty()
                    && n.len() <= 255
                    && n.bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"._-/:@".contains(&b))
                    && !n.starts_with(['-', '.', ':', '/']);
                if ok {
                    Ok(())
                } else {
                    Err(ProviderError::invalid(
                        "image",
                        format!("{n:?} is not an image name such as debian:bookworm"),
                    ))
                }
            }
            ImageSource::Recipe(r) => {
                let from = r
                    .lines()
                    .map(str::trim)
                    .any(|l| l.get(..5).is_some_and(|w| w.eq_ignore_ascii_case("FROM ")));
                if from {
                    Ok(())
                } else {
                    Err(ProviderError::invalid(
                        "recipe",
                        "the recipe has no FROM line: give a Dockerfile",
                    ))
                }
            }
        }
    }
}

/// `computer-mcp:<first 12 hex digits of the recipe's sha256>`.
pub fn recipe_tag(recipe: &str) -> String {
    format!("computer-mcp:{}", &sha256_bytes(recipe.as_bytes())[..12])
}

/// An image made ready: its tag, and its inspect as read then.
pub type Ready = (String, bollard::models::ImageInspect);

type Flight = Shared<BoxFuture<'static, Result<Ready>>>;

/// The flights in the air, one per image.
#[derive(Clone, Default)]
pub struct Flights {
    inner: Arc<Mutex<HashMap<String, Flight>>>,
}

impl Flights {
    /// The tag of `source`, made ready (one flight per image), with the
    /// inspect that found it ready.
    pub async fn ensure(
        &self,
        docker: &Docker,
        socket: &str,
        source: &ImageSource,
    ) -> Result<Ready> {
        source.check()?;
        let key = source.tag();
        let flight = {
            let mut map = self.inner.lock().unwrap_or_else(|p| p.into_inner());
            match map.get(&key) {
                Some(f) => f.clone(),
                None => {
                    let (docker, socket, source, inner, k) = (
                        docker.clone(),
                        socket.to_string(),
                        source.clone(),
                        Arc::clone(&self.inner),
                        key.clone(),
                    );
                    let f = async move {
                        let r = make_ready(&docker, &socket, &source).await;
                        inner.lock().unwrap_or_else(|p| p.into_inner()).remove(&k);
                        r
                    }
                    .boxed()
                    .shared();
                    map.insert(key.clone(), f.clone());
                    f
                }
            }
        };
        flight.await
    }
}

async fn make_ready(docker: &Docker, socket: &str, source: &ImageSource) -> Result<Ready> {
    let tag = source.tag();
    match source {
        ImageSource::Name(name) => {
            match docker.inspect_image(name).await {
                Ok(i) => return Ok((tag, i)),
                Err(e) if is_not_found(&e) => {}
                Err(e) => return Err(docker_error(socket, "reading the image", e)),
            }
            let mut pull = docker.create_image(
                Some(CreateImageOptionsBuilder::new().from_image(name).build()),
                None,
                None,
            );
            let mut failed = None;
            while let Some(step) = pull.next().await {
                if let Err(e) = step {
                    failed = Some(e);
                    break;
                }
            }
            // A pull that failed may still have left the image (another
            // process pulled it): Docker's own answer decides.
            match docker.inspect_image(name).await {
                Ok(i) => Ok((tag, i)),
                Err(_) => {
                    if let Some(e) = &failed {
                        tracing::warn!("pulling {name}: {e}");
                    }
                    Err(ProviderError::not_found(format!(
                        "the image {name} is not on this Docker host and could not be pulled (no registry gave it): load it (docker load, docker import) or name another image"
                    ))
                    .with_field("image"))
                }
            }
        }
        ImageSource::Recipe(recipe) => {
            let sum = sha256_bytes(recipe.as_bytes());
            let labelled = |i: &bollard::models::ImageInspect| {
                i.config
                    .as_ref()
                    .and_then(|c| c.labels.as_ref())
                    .and_then(|l| l.get(label::RECIPE))
                    == Some(&sum)
            };
            match docker.inspect_image(&tag).await {
                Ok(i) if labelled(&i) => return Ok((tag, i)),
                Ok(_) => {}
                Err(e) if is_not_found(&e) => {}
                Err(e) => return Err(docker_error(socket, "reading the recipe's image", e)),
            }
            let context = recipe_context(recipe)?;
            let labels = HashMap::from([(label::RECIPE.to_string(), sum.clone())]);
            let opts = BuildImageOptionsBuilder::new()
                .dockerfile("Dockerfile")
                .t(&tag)
                .q(true)
                .rm(true)
                .forcerm(true)
                .labels(&labels)
                .build();
            let mut build =
                docker.build_image(opts, None, Some(bollard::body_full(context.into())));
            let mut failed: Option<String> = None;
            while let Some(step) = build.next().await {
                match step {
                    Ok(info) => {
                        if let Some(err) = info.error_detail.and_then(|d| d.message) {
                            failed = Some(err);
                        }
                    }
                    Err(e) => {
                        failed = Some(e.to_string());
                        break;
                    }
                }
            }
            match docker.inspect_image(&tag).await {
                Ok(i) if labelled(&i) => Ok((tag, i)),
                _ => {
                    let why = failed.unwrap_or_else(|| "it made no image".into());
                    tracing::warn!("building {tag}: {why}");
                    Err(ProviderError::new(
                        ErrorCode::Failed,
                        format!(
                            "building the recipe's image {tag} failed: {}",
                            build_words(&why)
                        ),
                    )
                    .with_field("recipe"))
                }
            }
        }
    }
}

/// The recipe's own words for a failed step, else what kind of failure.
fn build_words(why: &str) -> String {
    if let Some(rest) = why.split("The command '").nth(1) {
        let step: String = rest
            .split('\'')
            .next()
            .unwrap_or("")
            .chars()
            .take(200)
            .collect();
        let code = why.rsplit("non-zero code: ").next().unwrap_or("?").trim();
        return format!("the step `{step}` failed with exit code {code}");
    }
    if why.contains("no space left") {
        return "Docker ran out of disk space".into();
    }
    if why.contains("pull access denied")
        || why.contains("manifest unknown")
        || why.contains("not found")
    {
        return "its base image could not be pulled: build or load the base first".into();
    }
    if why.contains("dial tcp") || why.contains("lookup ") {
        return "the build could not reach the network".into();
    }
    if why.contains("parse error") || why.contains("unknown instruction") {
        return format!(
            "Docker could not parse the recipe: {}",
            why.chars().take(200).collect::<String>()
        );
    }
    why.chars().take(200).collect()
}

/// A build context holding only the recipe, as `Dockerfile`.
fn recipe_context(recipe: &str) -> Result<Vec<u8>> {
    let mut b = tar::Builder::new(Vec::new());
    let mut h = tar::Header::new_gnu();
    h.set_size(recipe.len() as u64);
    h.set_mode(0o644);
    h.set_mtime(0);
    h.set_cksum();
    let out = b
        .append_data(&mut h, "Dockerfile", recipe.as_bytes())
        .and_then(|()| b.into_inner());
    out.map_err(|e| ProviderError::failed(format!("could not pack the recipe: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recipe_is_tagged_by_its_hash() {
        let r = "FROM debian:bookworm\nRUN true\n";
        let t = recipe_tag(r);
        assert!(t.starts_with("computer-mcp:") && t.len() == "computer-mcp:".len() + 12);
        assert_eq!(t, recipe_tag(r));
        assert_ne!(t, recipe_tag("FROM debian:bookworm\n"));
        assert!(ImageSource::Recipe(r.into()).check().is_ok());
        let e = ImageSource::Recipe("RUN true".into()).check().unwrap_err();
        assert_eq!(e.field.as_deref(), Some("recipe"));
    }

    #[test]
    fn a_bad_image_name_is_refused_before_docker() {
        assert!(ImageSource::Name("debian:bookworm".into()).check().is_ok());
        assert!(
            ImageSource::Name("registry.local:5000/a/b@sha256:ab".into())
                .check()
                .is_ok()
        );
        for bad in ["", "-x", "a b", "a\0b"] {
            assert!(ImageSource::Name(bad.into()).check().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_failed_step_is_named_in_the_recipes_words() {
        assert_eq!(
            build_words("The command '/bin/sh -c make' returned a non-zero code: 2"),
            "the step `/bin/sh -c make` failed with exit code 2"
        );
    }
}
