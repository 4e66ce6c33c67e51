//! Sealing at the row boundary: the four sealed columns as stored, with the row's life id
//! they are bound to ([`StoredBlobs`]). A row's values are sealed when it is inserted
//! (under a new life), sealed again only where a write changes their plaintext, and opened
//! when a row is decoded. The domain only ever sees plaintext; the stores only ever write
//! sealed values.

use super::StoreError;
use crate::domain::Receipt;
use crate::seal::{Binding, Field, LIFE_LEN, SealError, Sealer, Standing};

/// The error text written when claimd quarantines a row whose sealed fields do not open.
pub const UNREADABLE: &str = "sealed data failed authentication";

/// The sealed columns of one row, exactly as stored, and the row's `life_id` (read by
/// column name from either driver's row). The life id is written only when the row is
/// inserted; every other write leaves it as it is.
#[derive(Debug, Clone, Default, PartialEq, Eq, sqlx::FromRow)]
pub struct StoredBlobs {
    /// `last_error`.
    pub last_error: Option<Vec<u8>>,
    /// `checkpoint`.
    pub checkpoint: Option<Vec<u8>>,
    /// `response`.
    pub response: Option<Vec<u8>>,
    /// `recovery_payload`.
    pub recovery_payload: Option<Vec<u8>>,
    /// `life_id`: which life of the key the row is; `None` for a row from before lifetimes.
    pub life_id: Option<Vec<u8>>,
    /// `write_id`: which write made the row as it is, a UUID minted for each write
    /// (`RowWrite::id`), so a write whose answer was lost knows the row for its own
    /// (docs/DESIGN.md §4.2.1); `None` for a row last written before write ids.
    pub write_id: Option<uuid::Uuid>,
}

/// The binding of `tenant`'s row `namespace`/`key` in the life `life`.
pub(crate) fn binding<'a>(
    tenant: &'a str,
    namespace: &'a str,
    key: &'a str,
    life: &'a [u8],
) -> Binding<'a> {
    Binding {
        tenant,
        namespace,
        key,
        life,
    }
}

fn seal_opt(sealer: &Sealer, at: Binding<'_>, field: Field, v: Option<&[u8]>) -> Option<Vec<u8>> {
    v.map(|v| sealer.seal(at, field, v))
}

fn open_opt(
    sealer: &Sealer,
    at: Binding<'_>,
    field: Field,
    v: Option<&[u8]>,
) -> Result<Option<Vec<u8>>, SealError> {
    v.map(|v| sealer.open(at, field, v)).transpose()
}

/// The plaintext of every sealed field of `receipt`, in [`StoredBlobs::fields`] order.
fn plaintexts(receipt: &Receipt) -> [Option<&[u8]>; 4] {
    [
        receipt.last_error.as_deref().map(str::as_bytes),
        receipt.checkpoint.as_deref(),
        receipt.response.as_deref(),
        receipt.recovery_payload.as_deref(),
    ]
}

const FIELDS: [Field; 4] = [
    Field::LastError,
    Field::Checkpoint,
    Field::Response,
    Field::RecoveryPayload,
];

impl StoredBlobs {
    /// The row's life as bound into its values (empty for a row from before lifetimes).
    pub fn life(&self) -> &[u8] {
        self.life_id.as_deref().unwrap_or_default()
    }

    /// The binding of this row of `tenant` (whose namespace and key `receipt` names).
    fn binding<'a>(&'a self, tenant: &'a str, receipt: &'a Receipt) -> Binding<'a> {
        binding(tenant, &receipt.id.namespace, &receipt.id.key, self.life())
    }

    /// A new row's stored values: `receipt`'s sealed fields sealed under the new `life`.
    pub fn insert(
        sealer: &Sealer,
        tenant: &str,
        receipt: &Receipt,
        life: [u8; LIFE_LEN],
    ) -> StoredBlobs {
        let mut stored = StoredBlobs {
            life_id: Some(life.to_vec()),
            ..StoredBlobs::default()
        };
        let at = stored.binding(tenant, receipt);
        let sealed = FIELDS.map(|f| seal_opt(sealer, at, f, plaintexts(receipt)[index(f)]));
        stored.set_fields(sealed);
        stored
    }

    /// What to write when the row's receipt goes from `current` (as opened from these
    /// values) to `next`: the stored value of every field whose plaintext did not change,
    /// and only the fields that did change sealed anew, under the row's own life. `None`
    /// when no sealed field changed, so the write leaves them exactly as stored.
    pub fn changed(
        &self,
        sealer: &Sealer,
        tenant: &str,
        current: &Receipt,
        next: &Receipt,
    ) -> Option<StoredBlobs> {
        let (before, after) = (plaintexts(current), plaintexts(next));
        if before == after {
            return None;
        }
        let at = self.binding(tenant, next);
        let stored = self.fields();
        let sealed = FIELDS.map(|f| {
            let i = index(f);
            match before[i] == after[i] {
                true => stored[i].1.map(<[u8]>::to_vec),
                false => seal_opt(sealer, at, f, after[i]),
            }
        });
        let mut blobs = self.clone();
        blobs.set_fields(sealed);
        Some(blobs)
    }

    /// The sealed columns a write from `current` (as opened from these values) to `next`
    /// sets: only those whose plaintext changed, sealed anew under the row's own life.
    pub fn changes(
        &self,
        sealer: &Sealer,
        tenant: &str,
        current: &Receipt,
        next: &Receipt,
    ) -> super::write::Sealed {
        let (before, after) = (plaintexts(current), plaintexts(next));
        let at = self.binding(tenant, next);
        let [last_error, checkpoint, response, recovery_payload] = FIELDS.map(|f| {
            let i = index(f);
            (before[i] != after[i]).then(|| seal_opt(sealer, at, f, after[i]))
        });
        super::write::Sealed {
            last_error,
            checkpoint,
            response,
            recovery_payload,
        }
    }

    /// Opens every field into `receipt` (whose namespace and key name the row); fails
    /// closed, leaving `receipt` without plaintext, if any field does not verify.
    pub fn open_into(
        &self,
        sealer: &Sealer,
        tenant: &str,
        receipt: &mut Receipt,
    ) -> Result<(), StoreError> {
        let at = self.binding(tenant, receipt);
        let last_error = open_opt(sealer, at, Field::LastError, self.last_error.as_deref())?;
        let checkpoint = open_opt(sealer, at, Field::Checkpoint, self.checkpoint.as_deref())?;
        let response = open_opt(sealer, at, Field::Response, self.response.as_deref())?;
        let recovery_payload = open_opt(
            sealer,
            at,
            Field::RecoveryPayload,
            self.recovery_payload.as_deref(),
        )?;
        let last_error = last_error
            .map(String::from_utf8)
            .transpose()
            .map_err(|_| StoreError::Corrupt("last_error is not UTF-8".into()))?;
        receipt.last_error = last_error;
        receipt.checkpoint = checkpoint;
        receipt.response = response;
        receipt.recovery_payload = recovery_payload;
        Ok(())
    }

    /// How each present field stands against the sealer's current key.
    pub fn standings(&self, sealer: &Sealer) -> Vec<Standing> {
        let present = self.fields().into_iter().filter_map(|(_, v)| v);
        present.map(|v| sealer.standing(v)).collect()
    }

    /// Whether every present field is in the current format under the current key.
    pub fn is_current(&self, sealer: &Sealer) -> bool {
        self.standings(sealer)
            .iter()
            .all(|s| *s == Standing::Current)
    }

    /// Every field opened and sealed again in the current format under the current key and
    /// the row's own life (`at` names the row; its life is ignored), for `claimd reseal`.
    pub fn resealed(&self, sealer: &Sealer, at: Binding<'_>) -> Result<StoredBlobs, SealError> {
        let at = Binding {
            life: self.life(),
            ..at
        };
        let mut opened = Vec::with_capacity(4);
        for (field, v) in self.fields() {
            opened.push(open_opt(sealer, at, field, v)?);
        }
        let sealed = FIELDS.map(|f| seal_opt(sealer, at, f, opened[index(f)].as_deref()));
        let mut blobs = self.clone();
        blobs.set_fields(sealed);
        Ok(blobs)
    }

    /// Whether every field opens in the row `at` names (its life is ignored: the row's own
    /// is used), without sealing anything: a dry run of [`StoredBlobs::resealed`].
    pub fn verify(&self, sealer: &Sealer, at: Binding<'_>) -> Result<(), SealError> {
        let at = Binding {
            life: self.life(),
            ..at
        };
        for (field, v) in self.fields() {
            open_opt(sealer, at, field, v)?;
        }
        Ok(())
    }

    /// The sealed fields as stored, in [`FIELDS`] order.
    fn fields(&self) -> [(Field, Option<&[u8]>); 4] {
        [
            (Field::LastError, self.last_error.as_deref()),
            (Field::Checkpoint, self.checkpoint.as_deref()),
            (Field::Response, self.response.as_deref()),
            (Field::RecoveryPayload, self.recovery_payload.as_deref()),
        ]
    }

    fn set_fields(&mut self, [last_error, checkpoint, response, payload]: [Option<Vec<u8>>; 4]) {
        self.last_error = last_error;
        self.checkpoint = checkpoint;
        self.response = response;
        self.recovery_payload = payload;
    }
}

/// The position of `field` in [`FIELDS`].
fn index(field: Field) -> usize {
    match field {
        Field::LastError => 0,
        Field::Checkpoint => 1,
        Field::Response => 2,
        Field::RecoveryPayload => 3,
    }
}
