//! Tenants from the mesh's identity (issue 48): the caller's SPIFFE ID, from the
//! `URI=` of the last element of `x-forwarded-client-cert` (the element the sidecar added
//! for its immediate client: Envoy/Istio) or from Linkerd's `l5d-client-id`, believed only
//! on a request from a `[mesh]` trusted proxy (`mesh::forwarded::ViaTrustedProxy`), and
//! looked up in `[mesh.spiffe]`. The same header from anyone else is refused as
//! UNAUTHENTICATED; the header's value never reaches a log or a message.

use super::Refusal;
use crate::mesh::forwarded::ViaTrustedProxy;
use http::HeaderMap;

/// Envoy's (Istio's) header for the client certificate it verified.
pub const XFCC: &str = "x-forwarded-client-cert";
/// Linkerd's header for the client's verified identity.
pub const L5D_CLIENT_ID: &str = "l5d-client-id";

/// The SPIFFE ID a request claims through the mesh's headers: `None` without either,
/// `Err` when one is there but not believed (untrusted peer) or has no SPIFFE ID.
pub fn claimed_id<B>(request: &http::Request<B>) -> Option<Result<String, Refusal>> {
    let headers = request.headers();
    if !headers.contains_key(XFCC) && !headers.contains_key(L5D_CLIENT_ID) {
        return None;
    }
    if request.extensions().get::<ViaTrustedProxy>().is_none() {
        return Some(Err(Refusal::UntrustedIdentity));
    }
    Some(spiffe_id(headers).ok_or(Refusal::UnknownIdentity))
}

/// The SPIFFE ID of XFCC's last element, else of `l5d-client-id`.
fn spiffe_id(headers: &HeaderMap) -> Option<String> {
    if let Some(value) = headers.get_all(XFCC).iter().next_back() {
        let text = value.to_str().ok()?;
        let element = split_unquoted(text, ',').pop()?;
        return split_unquoted(element, ';').into_iter().find_map(|pair| {
            let (key, value) = pair.split_once('=')?;
            let value = value.trim().trim_matches('"');
            (key.trim().eq_ignore_ascii_case("uri") && value.starts_with("spiffe://"))
                .then(|| value.to_owned())
        });
    }
    let id = headers.get(L5D_CLIENT_ID)?.to_str().ok()?.trim();
    if id.starts_with("spiffe://") {
        return Some(id.to_owned());
    }
    linkerd_dns_to_spiffe(id)
}

/// Linkerd's DNS form `SA.NS.serviceaccount.identity.CONTROL_NS.TRUST_DOMAIN` as
/// `spiffe://TRUST_DOMAIN/ns/NS/sa/SA`.
fn linkerd_dns_to_spiffe(id: &str) -> Option<String> {
    let labels: Vec<&str> = id.split('.').collect();
    let at = labels.iter().position(|l| *l == "serviceaccount")?;
    if at != 2 || labels.get(3) != Some(&"identity") || labels.len() < 6 {
        return None;
    }
    let domain = labels[5..].join(".");
    Some(format!(
        "spiffe://{domain}/ns/{}/sa/{}",
        labels[1], labels[0]
    ))
}

/// `text` split at `sep` outside double quotes.
fn split_unquoted(text: &str, sep: char) -> Vec<&str> {
    let (mut parts, mut start, mut quoted) = (Vec::new(), 0, false);
    for (i, c) in text.char_indices() {
        if c == '"' {
            quoted = !quoted;
        } else if c == sep && !quoted {
            parts.push(&text[start..i]);
            start = i + 1;
        }
    }
    parts.push(&text[start..]);
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(headers: &[(&'static str, &str)], trusted: bool) -> Option<Result<String, Refusal>> {
        let mut request = http::Request::new(());
        for (name, value) in headers {
            let value = value.parse().unwrap();
            request.headers_mut().append(*name, value);
        }
        if trusted {
            let proxy = "127.0.0.6:1".parse().unwrap();
            request.extensions_mut().insert(ViaTrustedProxy { proxy });
        }
        claimed_id(&request)
    }

    #[test]
    fn the_immediate_callers_spiffe_id_is_read_from_xfcc_or_l5d_client_id() {
        let xfcc = "By=spiffe://cluster.local/ns/claimd/sa/claimd;Hash=ab12;\
                    Subject=\"CN=x,O=y\";URI=spiffe://cluster.local/ns/edge/sa/gw,\
                    By=spiffe://cluster.local/ns/claimd/sa/claimd;Hash=cd34;\
                    URI=spiffe://cluster.local/ns/payments/sa/webhooks";
        let want = "spiffe://cluster.local/ns/payments/sa/webhooks".to_owned();
        assert_eq!(id(&[(XFCC, xfcc)], true), Some(Ok(want.clone())));
        let dns = "webhooks.payments.serviceaccount.identity.linkerd.cluster.local";
        assert_eq!(id(&[(L5D_CLIENT_ID, dns)], true), Some(Ok(want.clone())));
        assert_eq!(id(&[(L5D_CLIENT_ID, &want)], true), Some(Ok(want)));
        assert_eq!(id(&[], true), None);
    }

    #[test]
    fn an_identity_header_from_an_untrusted_peer_or_without_an_id_is_refused() {
        let xfcc = "Hash=ab;URI=spiffe://cluster.local/ns/payments/sa/webhooks";
        let untrusted = Some(Err(Refusal::UntrustedIdentity));
        assert_eq!(id(&[(XFCC, xfcc)], false), untrusted);
        assert_eq!(id(&[(L5D_CLIENT_ID, "a.b")], false), untrusted);
        let unknown = Some(Err(Refusal::UnknownIdentity));
        assert_eq!(id(&[(XFCC, "Hash=ab;DNS=x")], true), unknown);
        assert_eq!(id(&[(L5D_CLIENT_ID, "not-an-identity")], true), unknown);
    }
}
