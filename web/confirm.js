// In-page confirmation instead of window.confirm: it can be styled, read by
// screen readers as a modal dialog, and clicked by browser tests.

let pending = null;

export function confirmAction({ title, message, yes = 'Confirm', danger = false }) {
	const dlg = document.getElementById('confirm');
	if (pending) pending(false);
	document.getElementById('confirm-title').textContent = title;
	document.getElementById('confirm-message').textContent = message;
	const yesBtn = dlg.querySelector('[data-testid="confirm-yes"]');
	const noBtn = dlg.querySelector('[data-testid="confirm-no"]');
	yesBtn.textContent = yes;
	yesBtn.classList.toggle('danger', danger);
	const opener = document.activeElement;
	return new Promise((resolve) => {
		const done = (answer) => {
			if (pending !== finish) return;
			pending = null;
			yesBtn.removeEventListener('click', onYes);
			noBtn.removeEventListener('click', onNo);
			dlg.removeEventListener('cancel', onCancel);
			if (dlg.open) dlg.close();
			// Focus goes back where the person was, not to the top of the page.
			if (opener && opener.isConnected && typeof opener.focus === 'function') opener.focus();
			resolve(answer);
		};
		const finish = done;
		const onYes = () => done(true);
		const onNo = () => done(false);
		const onCancel = (e) => { e.preventDefault(); done(false); };
		pending = finish;
		yesBtn.addEventListener('click', onYes);
		noBtn.addEventListener('click', onNo);
		dlg.addEventListener('cancel', onCancel);
		dlg.showModal();
		// The safe answer has focus, so Enter by reflex does not destroy anything.
		noBtn.focus();
	});
}
